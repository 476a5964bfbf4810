! SPDX-License-Identifier: Apache-2.0
!
! Two sections drain the even and the odd jobs of a queue and add the job
! costs to a shared total. The first section takes an OpenMP lock around
! its update of the total.
program job_sections
  use omp_lib
  implicit none
  integer, parameter :: njobs = 64
  integer :: cost(njobs), j
  integer(kind=omp_lock_kind) :: lck
  integer(8) :: spent

  do j = 1, njobs
    cost(j) = 1 + mod(j * 11, 7)
  end do
  spent = 0
  call omp_init_lock(lck)

  !$omp parallel sections private(j)
  !$omp section
  do j = 2, njobs, 2
    call omp_set_lock(lck)
    spent = spent + cost(j)
    call omp_unset_lock(lck)
  end do
  !$omp section
  do j = 1, njobs, 2
    spent = spent + cost(j)
  end do
  !$omp end parallel sections

  call omp_destroy_lock(lck)
  print *, 'spent =', spent
end program job_sections
