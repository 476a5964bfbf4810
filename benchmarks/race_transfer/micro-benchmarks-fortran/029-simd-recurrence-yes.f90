! SPDX-License-Identifier: Apache-2.0
!
! First-order IIR smoothing filter y(i) = a*y(i-1) + (1-a)*x(i) applied to
! a square wave, with the loop vectorised by an OpenMP simd directive.
subroutine smooth(n, a, x, y)
  implicit none
  integer, intent(in) :: n
  real, intent(in) :: a, x(n)
  real, intent(inout) :: y(n)
  integer :: i

  y(1) = x(1)
  !$omp simd
  do i = 2, n
    y(i) = a * y(i - 1) + (1.0 - a) * x(i)
  end do
  !$omp end simd
end subroutine smooth

program iir_filter
  implicit none
  integer, parameter :: n = 4096
  real :: x(n), y(n)
  integer :: i

  do i = 1, n
    if (mod(i - 1, 64) < 32) then
      x(i) = 1.0
    else
      x(i) = 0.0
    end if
  end do
  call smooth(n, 0.9, x, y)
  print *, y(100), y(n)
end program iir_filter
