! SPDX-License-Identifier: Apache-2.0
!
! Left shift of a vector in place: every element takes the value of its
! right-hand neighbour plus one, in a parallel do loop.
program vector_shift
  implicit none
  integer, parameter :: len = 1000
  integer :: i
  integer :: a(len)

  do i = 1, len
    a(i) = i
  end do

  !$omp parallel do
  do i = 1, len - 1
    a(i) = a(i + 1) + 1
  end do
  !$omp end parallel do

  print *, 'a(500) =', a(500)
end program vector_shift
