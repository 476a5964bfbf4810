! SPDX-License-Identifier: Apache-2.0
!
! y = a*x + y on an accelerator, repeated several times inside a target
! data region; each repetition distributes the iterations over a league of
! teams and the threads of each team.
module device_blas
  implicit none
contains
  subroutine axpy(n, a, x, y)
    integer, intent(in) :: n
    real, intent(in) :: a, x(n)
    real, intent(inout) :: y(n)
    integer :: i
    !$omp target teams distribute parallel do
    do i = 1, n
      y(i) = a * x(i) + y(i)
    end do
    !$omp end target teams distribute parallel do
  end subroutine axpy
end module device_blas

program axpy_driver
  use device_blas
  implicit none
  integer, parameter :: n = 100000
  real, allocatable :: x(:), y(:)
  integer :: i, rep

  allocate(x(n), y(n))
  x = 0.5
  do i = 1, n
    y(i) = real(mod(i - 1, 4))
  end do

  !$omp target data map(to: x) map(tofrom: y)
  do rep = 1, 10
    call axpy(n, 2.0, x, y)
  end do
  !$omp end target data

  print *, y(1), y(4)
  deallocate(x, y)
end program axpy_driver
