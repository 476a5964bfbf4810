! SPDX-License-Identifier: Apache-2.0
!
! Collect the indices of all readings above an alarm level into a compact
! list. A slot in the list is claimed with an atomic capture of the
! running count.
program alarm_list
  implicit none
  integer, parameter :: nread = 10000, alarm = 90
  integer :: readings(nread), alarms(nread)
  integer :: i, nalarm, slot

  do i = 1, nread
    readings(i) = mod(i * 7 + 3, 100)
  end do
  nalarm = 0

  !$omp parallel do private(slot)
  do i = 1, nread
    if (readings(i) > alarm) then
      !$omp atomic capture
      nalarm = nalarm + 1
      slot = nalarm
      !$omp end atomic
      alarms(slot) = i
    end if
  end do
  !$omp end parallel do

  print *, nalarm, 'alarms'
end program alarm_list
