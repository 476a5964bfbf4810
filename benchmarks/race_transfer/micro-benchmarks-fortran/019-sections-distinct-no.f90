! SPDX-License-Identifier: Apache-2.0
!
! Three preprocessing steps of a signal run as parallel sections: a
! three-point moving average, a first difference and a clipped copy. Each
! section writes its own output array.
program signal_sections
  implicit none
  integer, parameter :: n = 4096
  real :: raw(n), smooth(n), diff(n), clipped(n)
  integer :: i

  do i = 1, n
    raw(i) = real(mod(i * 13, 29)) - 14.0
  end do

  !$omp parallel sections private(i)
  !$omp section
  smooth(1) = raw(1)
  do i = 2, n - 1
    smooth(i) = (raw(i - 1) + raw(i) + raw(i + 1)) / 3.0
  end do
  smooth(n) = raw(n)
  !$omp section
  diff(1) = 0.0
  do i = 2, n
    diff(i) = raw(i) - raw(i - 1)
  end do
  !$omp section
  clipped = min(max(raw, -10.0), 10.0)
  !$omp end parallel sections

  print *, smooth(100), diff(100), clipped(100)
end program signal_sections
