! SPDX-License-Identifier: Apache-2.0
!
! Scale a signal and keep the last scaled sample, which is printed after
! the loop.
program scale_signal
  implicit none
  integer, parameter :: n = 256
  real :: sig(n), scaled(n), last, gain
  integer :: i

  gain = 2.5
  last = 0.0
  do i = 1, n
    sig(i) = real(mod(i, 17)) - 8.0
  end do

  !$omp parallel do firstprivate(gain)
  do i = 1, n
    last = sig(i) * gain
    scaled(i) = last
  end do
  !$omp end parallel do

  print *, 'last =', last, ' scaled(10) =', scaled(10)
end program scale_signal
