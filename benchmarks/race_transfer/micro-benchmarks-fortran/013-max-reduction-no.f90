! SPDX-License-Identifier: Apache-2.0
!
! Largest absolute residual of the linear model y = 2x + 1 over noisy data
! and the root-mean-square residual, with max and sum reductions.
program residual_stats
  implicit none
  integer, parameter :: npts = 2048
  real(8) :: xs(npts), ys(npts), r, rmax, sq
  integer :: i

  do i = 1, npts
    xs(i) = 0.01d0 * i
    ys(i) = 2.0d0 * xs(i) + 1.0d0 + 0.05d0 * sin(1.7d0 * i)
  end do

  rmax = 0.0d0
  sq = 0.0d0
  !$omp parallel do private(r) reduction(max:rmax) reduction(+:sq)
  do i = 1, npts
    r = abs(ys(i) - (2.0d0 * xs(i) + 1.0d0))
    rmax = max(rmax, r)
    sq = sq + r * r
  end do
  !$omp end parallel do

  print *, 'max residual', rmax, ' rms', sqrt(sq / npts)
end program residual_stats
