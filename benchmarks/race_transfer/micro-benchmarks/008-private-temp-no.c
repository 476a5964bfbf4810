/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Convert a table of temperatures from Celsius to Fahrenheit and Kelvin.
 * A scratch variable holds the scaled value of the current entry.
 */
#include <stdio.h>

#define ROWS 500

int main(void)
{
  double celsius[ROWS], fahrenheit[ROWS], kelvin[ROWS];
  double scaled;
  int r;

  for (r = 0; r < ROWS; r++)
    celsius[r] = -40.0 + 0.3 * r;

#pragma omp parallel for private(scaled)
  for (r = 0; r < ROWS; r++) {
    scaled = celsius[r] * 9.0 / 5.0;
    fahrenheit[r] = scaled + 32.0;
    kelvin[r] = celsius[r] + 273.15;
  }

  printf("%f %f\n", fahrenheit[ROWS - 1], kelvin[0]);
  return 0;
}
