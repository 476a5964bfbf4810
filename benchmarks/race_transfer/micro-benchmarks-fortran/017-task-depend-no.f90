! SPDX-License-Identifier: Apache-2.0
!
! A three-stage task pipeline inside a single construct: fill a buffer,
! filter it into a second buffer, and reduce the filtered buffer to a mean.
! The stages are ordered by task dependences.
program task_pipeline
  implicit none
  integer, parameter :: blk = 1024
  real(8) :: buf(blk), filt(blk), mean
  integer :: i

  mean = 0.0d0
  !$omp parallel
  !$omp single
  !$omp task depend(out: buf) shared(buf) private(i)
  do i = 1, blk
    buf(i) = real(mod(i * 17, 64), 8)
  end do
  !$omp end task

  !$omp task depend(in: buf) depend(out: filt) shared(buf, filt) private(i)
  do i = 1, blk
    filt(i) = max(buf(i) - 32.0d0, 0.0d0)
  end do
  !$omp end task

  !$omp task depend(in: filt) depend(out: mean) shared(filt, mean)
  mean = sum(filt) / blk
  !$omp end task

  !$omp task depend(in: mean) shared(mean)
  print *, 'mean of filtered block =', mean
  !$omp end task
  !$omp end single
  !$omp end parallel
end program task_pipeline
