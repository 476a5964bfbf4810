! SPDX-License-Identifier: Apache-2.0
!
! Jacobi relaxation of the 2-D Poisson equation -lap(u) = f on the unit
! square with Dirichlet boundary values, written as a small solver module.
!
! The grids live in the module as allocatable arrays. One sweep computes
! the new grid from the old one and tracks the largest change with a max
! reduction; a second parallel loop copies the new grid back. A separate
! routine computes the residual norm, and the driver stops when the
! change falls below a tolerance.
module jacobi_grid
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer :: nx, ny
  real(dp) :: h
  real(dp), allocatable :: u(:, :), unew(:, :), f(:, :)
contains
  subroutine grid_init(n)
    integer, intent(in) :: n
    integer :: i, j
    nx = n
    ny = n
    h = 1.0_dp / real(n - 1, dp)
    allocate(u(nx, ny), unew(nx, ny), f(nx, ny))
    u = 0.0_dp
    u(1, :) = 100.0_dp
    do j = 1, ny
      do i = 1, nx
        f(i, j) = sin(3.0_dp * h * (i - 1)) * cos(2.0_dp * h * (j - 1))
      end do
    end do
    unew = u
  end subroutine grid_init

  subroutine sweep(change)
    real(dp), intent(out) :: change
    integer :: i, j
    real(dp) :: d

    change = 0.0_dp
    !$omp parallel do collapse(2) private(d) reduction(max:change)
    do j = 2, ny - 1
      do i = 2, nx - 1
        unew(i, j) = 0.25_dp * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1) &
                                + h * h * f(i, j))
        d = abs(unew(i, j) - u(i, j))
        if (d > change) change = d
      end do
    end do
    !$omp end parallel do

    !$omp parallel do
    do j = 2, ny - 1
      u(2:nx - 1, j) = unew(2:nx - 1, j)
    end do
    !$omp end parallel do
  end subroutine sweep

  function residual_norm() result(rn)
    real(dp) :: rn, r
    integer :: i, j
    rn = 0.0_dp
    !$omp parallel do private(i, r) reduction(+:rn)
    do j = 2, ny - 1
      do i = 2, nx - 1
        r = f(i, j) + (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1) &
                       - 4.0_dp * u(i, j)) / (h * h)
        rn = rn + r * r
      end do
    end do
    !$omp end parallel do
    rn = sqrt(rn * h * h)
  end function residual_norm

  subroutine grid_free()
    deallocate(u, unew, f)
  end subroutine grid_free
end module jacobi_grid

program jacobi_driver
  use jacobi_grid
  implicit none
  integer :: iter
  real(dp) :: change

  call grid_init(128)
  do iter = 1, 500
    call sweep(change)
    if (change < 1.0e-4_dp) exit
  end do
  print '(a, i5, a, es12.4)', 'iterations', iter, '  change', change
  print '(a, es12.4, a, f10.6)', 'residual  ', residual_norm(), '  centre', u(nx / 2, ny / 2)
  call grid_free()
end program jacobi_driver
