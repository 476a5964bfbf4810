! SPDX-License-Identifier: Apache-2.0
!
! Midpoint-rule integration of 4/(1+x**2) on [0,1] (which gives pi) in a
! parallel do loop; the step width and the abscissa are private.
program midpoint_pi
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: nsteps = 1000000
  real(dp) :: h, x, area
  integer :: k

  h = 1.0_dp / nsteps
  area = 0.0_dp

  !$omp parallel do private(x) firstprivate(h)
  do k = 1, nsteps
    x = (k - 0.5_dp) * h
    area = area + 4.0_dp / (1.0_dp + x * x) * h
  end do
  !$omp end parallel do

  print '(a, f16.12)', 'pi ~ ', area
end program midpoint_pi
