! SPDX-License-Identifier: Apache-2.0
!
! Sum of a sample and compound growth factor of a rate series, computed in
! one parallel loop with a sum and a product reduction.
program growth_stats
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: n = 1200
  real(dp) :: rate(n), total, growth
  integer :: k

  do k = 1, n
    rate(k) = 0.0005_dp * real(mod(k, 5) - 1, dp)
  end do

  total = 0.0_dp
  growth = 1.0_dp
  !$omp parallel do reduction(+:total) reduction(*:growth)
  do k = 1, n
    total = total + rate(k)
    growth = growth * (1.0_dp + rate(k))
  end do
  !$omp end parallel do

  print '(a, f12.6, a, f12.6)', 'total rate ', total, '  growth ', growth
end program growth_stats
