! SPDX-License-Identifier: Apache-2.0
!
! Eight interleaved running sums over a signal stored as groups of eight
! channels: sample i adds the value eight positions earlier. The loop is
! vectorised with an OpenMP simd directive with safelen(8).
program channel_sums
  implicit none
  integer, parameter :: n = 4096, nchan = 8
  real(8) :: acc(n), sig(n)
  integer :: i

  do i = 1, n
    sig(i) = real(mod(i - 1, nchan), 8) + 0.25d0
  end do
  acc(1:nchan) = sig(1:nchan)

  !$OMP SIMD SAFELEN(8)
  do i = nchan + 1, n
    acc(i) = acc(i - nchan) + sig(i)
  end do
  !$OMP END SIMD

  print *, acc(n - nchan + 1:n)
end program channel_sums
