! SPDX-License-Identifier: Apache-2.0
!
! Histogram of a synthetic data set with one OpenMP lock per bin. Every
! update of a bin is done while holding its lock, and the overall sample
! count is updated in a critical section. The worksharing loop carries a
! nowait clause; the histogram is printed after the parallel region.
program locked_histogram
  use omp_lib
  implicit none
  integer, parameter :: n = 100000, nbins = 16
  integer(kind=omp_lock_kind) :: binlock(nbins)
  integer :: hist(nbins), counted, i, b
  real(8) :: x

  hist = 0
  counted = 0
  do b = 1, nbins
    call omp_init_lock(binlock(b))
  end do

  !$omp parallel private(x, b)
  !$omp do
  do i = 1, n
    x = mod(i * 0.618034d0, 1.0d0)
    b = min(int(x * nbins) + 1, nbins)
    call omp_set_lock(binlock(b))
    hist(b) = hist(b) + 1
    call omp_unset_lock(binlock(b))
    !$omp critical
    counted = counted + 1
    !$omp end critical
  end do
  !$omp end do nowait
  !$omp end parallel

  do b = 1, nbins
    call omp_destroy_lock(binlock(b))
  end do
  print '(16i7)', hist
  print *, 'counted', counted
end program locked_histogram
