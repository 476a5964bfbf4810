! SPDX-License-Identifier: Apache-2.0
!
! Sweep across the columns of a 2-D field stored in column-major order:
! each column is the previous column plus a source term. Columns are
! visited in order; the rows of one column are split over the threads.
program column_sweep
  implicit none
  integer, parameter :: m = 300, n = 200
  real(8) :: field(m, n), src(m, n)
  integer :: i, j

  do j = 1, n
    do i = 1, m
      field(i, j) = 0.0d0
      src(i, j) = 1.0d-3 * (i + j)
    end do
  end do
  field(:, 1) = 1.0d0

  do j = 2, n
    !$OMP PARALLEL DO
    do i = 1, m
      field(i, j) = field(i, j - 1) + src(i, j)
    end do
    !$OMP END PARALLEL DO
  end do

  print *, 'field(150, n) =', field(150, n)
end program column_sweep
