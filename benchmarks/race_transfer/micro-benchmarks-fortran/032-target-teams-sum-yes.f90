! SPDX-License-Identifier: Apache-2.0
!
! Dot product of two vectors and a count of positive products, offloaded
! with a combined target teams distribute parallel do construct. The count
! is a reduction variable; both scalars are mapped tofrom.
program device_dot
  implicit none
  integer, parameter :: n = 2**20
  real(8), allocatable :: x(:), y(:)
  real(8) :: dot
  integer :: i, npos

  allocate(x(n), y(n))
  do i = 1, n
    x(i) = 1.0d0
    if (mod(i, 2) == 0) then
      y(i) = 2.0d0
    else
      y(i) = -0.5d0
    end if
  end do
  dot = 0.0d0
  npos = 0

  !$omp target teams distribute parallel do map(to: x, y) map(tofrom: dot, npos) &
  !$omp& reduction(+: npos)
  do i = 1, n
    dot = dot + x(i) * y(i)
    if (x(i) * y(i) > 0.0d0) npos = npos + 1
  end do
  !$omp end target teams distribute parallel do

  print *, 'dot =', dot, ' positive =', npos
  deallocate(x, y)
end program device_dot
