! SPDX-License-Identifier: Apache-2.0
!
! Shifted copy: the output vector receives the input vector moved one
! position to the left, plus one. Input and output are separate
! allocatable arrays.
program shifted_copy
  implicit none
  integer :: i, n
  integer, allocatable :: src(:), dst(:)

  n = 1000
  allocate(src(n), dst(n))
  do i = 1, n
    src(i) = i
  end do
  dst(n) = 0

  !$OMP PARALLEL DO
  do i = 1, n - 1
    dst(i) = src(i + 1) + 1
  end do
  !$OMP END PARALLEL DO

  print *, 'dst(500) =', dst(500)
  deallocate(src, dst)
end program shifted_copy
