! SPDX-License-Identifier: Apache-2.0
!
! Scatter a vector through an index table generated as
! perm(i) = mod((i-1)*7919, 1024) + 1; 7919 is odd and the length is a
! power of two. The table is checked before the scatter.
program permuted_scatter
  implicit none
  integer, parameter :: n = 1024
  integer :: perm(n), hits(n), i
  real(8) :: src(n), dst(n)

  do i = 1, n
    perm(i) = mod((i - 1) * 7919, n) + 1
    src(i) = 0.5d0 * (i - 1)
  end do
  hits = 0
  do i = 1, n
    hits(perm(i)) = hits(perm(i)) + 1
  end do
  if (any(hits /= 1)) stop 'index table has a repeated entry'

  !$OMP PARALLEL DO SHARED(perm, src, dst)
  do i = 1, n
    dst(perm(i)) = 2.0d0 * src(i) + 1.0d0
  end do
  !$OMP END PARALLEL DO

  print *, dst(1), dst(n)
end program permuted_scatter
