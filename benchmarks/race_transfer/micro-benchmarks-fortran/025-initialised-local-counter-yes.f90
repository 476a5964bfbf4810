! SPDX-License-Identifier: Apache-2.0
!
! Evaluate a damped oscillation at many sample times. The evaluation
! routine keeps a count of how often it has been called in a local
! variable with an initial value, and reports it on request.
module oscillator
  implicit none
contains
  subroutine evaluate(t, y, report)
    real(8), intent(in) :: t
    real(8), intent(out) :: y
    logical, intent(in) :: report
    integer :: ncalls = 0
    ncalls = ncalls + 1
    y = exp(-0.1d0 * t) * cos(2.0d0 * t)
    if (report) print *, 'evaluations so far:', ncalls
  end subroutine evaluate
end module oscillator

program sample_oscillator
  use oscillator
  implicit none
  integer, parameter :: ns = 2000
  real(8) :: ys(ns), dummy
  integer :: i

  !$omp parallel do
  do i = 1, ns
    call evaluate(0.01d0 * i, ys(i), .false.)
  end do
  !$omp end parallel do

  call evaluate(0.0d0, dummy, .true.)
  print *, 'y(ns) =', ys(ns)
end program sample_oscillator
