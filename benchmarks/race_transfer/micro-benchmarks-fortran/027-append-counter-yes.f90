! SPDX-License-Identifier: Apache-2.0
!
! Collect the indices of all readings above an alarm level into a compact
! list. The running length is incremented atomically as entries are
! appended.
program alarm_list
  implicit none
  integer, parameter :: nread = 10000, alarm = 90
  integer :: readings(nread), alarms(nread)
  integer :: i, nalarm

  do i = 1, nread
    readings(i) = mod(i * 7 + 3, 100)
  end do
  nalarm = 0

  !$OMP PARALLEL DO
  do i = 1, nread
    if (readings(i) > alarm) then
      !$OMP ATOMIC
      nalarm = nalarm + 1
      alarms(nalarm) = i
    end if
  end do
  !$OMP END PARALLEL DO

  print *, nalarm, 'alarms'
end program alarm_list
