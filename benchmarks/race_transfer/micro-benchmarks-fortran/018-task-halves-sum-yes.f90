! SPDX-License-Identifier: Apache-2.0
!
! The sum of an array computed as two halves by two explicit tasks created
! in a single construct; the creating thread adds the halves and prints
! the result.
module halves
  implicit none
  integer, parameter :: n = 100000
  real(8) :: dat(n)
contains
  function range_sum(lo, hi) result(s)
    integer, intent(in) :: lo, hi
    real(8) :: s
    integer :: k
    s = 0.0d0
    do k = lo, hi
      s = s + dat(k)
    end do
  end function range_sum
end module halves

program task_halves
  use halves
  implicit none
  real(8) :: lower, upper, total
  integer :: k

  do k = 1, n
    dat(k) = 1.0d0 / k
  end do
  lower = 0.0d0
  upper = 0.0d0

  !$OMP PARALLEL
  !$OMP SINGLE
  !$OMP TASK SHARED(lower) DEPEND(OUT: lower)
  lower = range_sum(1, n / 2)
  !$OMP END TASK
  !$OMP TASK SHARED(upper) DEPEND(OUT: upper)
  upper = range_sum(n / 2 + 1, n)
  !$OMP END TASK
  total = lower + upper
  print *, 'total =', total
  !$OMP END SINGLE
  !$OMP END PARALLEL
end program task_halves
