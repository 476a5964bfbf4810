! SPDX-License-Identifier: Apache-2.0
!
! Many independent 2x2 linear solves by Cramer's rule. The solver keeps
! its intermediate values in a module work array, counts the systems it
! solved in a threadprivate module variable, and returns the solution
! through its arguments.
module solver_work
  implicit none
  real(8), save :: work(3)
  integer, save :: nsolved = 0
  !$omp threadprivate(nsolved)
contains
  subroutine solve2(a, b, x)
    real(8), intent(in) :: a(2, 2), b(2)
    real(8), intent(out) :: x(2)
    work(1) = a(1, 1) * a(2, 2) - a(1, 2) * a(2, 1)
    work(2) = b(1) * a(2, 2) - a(1, 2) * b(2)
    work(3) = a(1, 1) * b(2) - b(1) * a(2, 1)
    x(1) = work(2) / work(1)
    x(2) = work(3) / work(1)
    nsolved = nsolved + 1
  end subroutine solve2
end module solver_work

program many_solves
  use solver_work
  implicit none
  integer, parameter :: nsys = 5000
  real(8) :: a(2, 2), b(2), sol(2, nsys)
  integer :: k

  !$omp parallel do private(a, b)
  do k = 1, nsys
    a = reshape([4.0d0 + mod(k, 5), 1.0d0, 1.0d0, 3.0d0], [2, 2])
    b = [1.0d0, real(mod(k, 7), 8)]
    call solve2(a, b, sol(:, k))
  end do
  !$omp end parallel do

  print *, 'checksum =', sum(abs(sol)), ' solved on primary thread:', nsolved
end program many_solves
