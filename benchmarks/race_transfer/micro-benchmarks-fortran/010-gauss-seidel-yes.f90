! SPDX-License-Identifier: Apache-2.0
!
! Relaxation of the 2-D Laplace equation updating the grid in place: each
! interior point becomes the average of its four neighbours. The two loops
! of every sweep are collapsed into one parallel do.
program inplace_relax
  implicit none
  integer, parameter :: n = 128, nsweep = 200
  real(8), allocatable :: u(:, :)
  integer :: i, j, s

  allocate(u(n, n))
  u = 0.0d0
  u(1, :) = 100.0d0

  do s = 1, nsweep
    !$omp parallel do collapse(2)
    do j = 2, n - 1
      do i = 2, n - 1
        u(i, j) = 0.25d0 * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1))
      end do
    end do
    !$omp end parallel do
  end do

  print *, 'centre =', u(n / 2, n / 2)
  deallocate(u)
end program inplace_relax
