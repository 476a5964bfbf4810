! SPDX-License-Identifier: Apache-2.0
!
! Normalise a vector by its Euclidean norm. One thread computes the norm in
! a single construct; the team then divides the elements by it.
program normalise
  implicit none
  integer, parameter :: n = 5000
  real(8) :: v(n), vnorm
  integer :: i

  do i = 1, n
    v(i) = real(mod(i, 13), 8) - 6.0d0
  end do
  vnorm = 1.0d0

  !$omp parallel shared(v, vnorm)
  !$omp single
  vnorm = sqrt(sum(v * v))
  !$omp end single nowait

  !$omp do
  do i = 1, n
    v(i) = v(i) / vnorm
  end do
  !$omp end do
  !$omp end parallel

  print *, 'norm =', vnorm, ' v(7) =', v(7)
end program normalise
