! SPDX-License-Identifier: Apache-2.0
!
! Normalise a vector by its Euclidean norm. One thread computes the norm in
! a single construct; the team then divides the elements by it.
program normalise
  implicit none
  integer, parameter :: n = 5000
  real(8) :: v(n), vnorm
  integer :: i

  do i = 1, n
    v(i) = real(mod(i, 13), 8) - 6.0d0
  end do
  vnorm = 1.0d0

  !$OMP PARALLEL SHARED(v, vnorm)
  !$OMP SINGLE
  vnorm = sqrt(sum(v * v))
  !$OMP END SINGLE

  !$OMP DO
  do i = 1, n
    v(i) = v(i) / vnorm
  end do
  !$OMP END DO
  !$OMP END PARALLEL

  print *, 'norm =', vnorm, ' v(7) =', v(7)
end program normalise
