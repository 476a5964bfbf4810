! SPDX-License-Identifier: Apache-2.0
!
! Convert a table of temperatures from Celsius to Fahrenheit and Kelvin.
! A scratch variable holds the scaled value of the current entry.
program temperature_table
  implicit none
  integer, parameter :: rows = 500
  real :: celsius(rows), fahrenheit(rows), kelvin(rows)
  real :: scaled
  integer :: r

  do r = 1, rows
    celsius(r) = -40.0 + 0.3 * (r - 1)
  end do

  !$omp parallel do private(scaled)
  do r = 1, rows
    scaled = celsius(r) * 9.0 / 5.0
    fahrenheit(r) = scaled + 32.0
    kelvin(r) = celsius(r) + 273.15
  end do
  !$omp end parallel do

  print *, fahrenheit(rows), kelvin(1)
end program temperature_table
