/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Midpoint-rule integration of 4/(1+x^2) on [0,1] (which gives pi) using
 * a taskloop with a fixed grain size.
 */
#include <stdio.h>

#define STEPS 1000000

int main(void)
{
  const double h = 1.0 / STEPS;
  double area = 0.0;

#pragma omp parallel
#pragma omp single
  {
#pragma omp taskloop grainsize(10000) shared(area)
    for (long k = 0; k < STEPS; k++) {
      double x = (k + 0.5) * h;
      area += 4.0 / (1.0 + x * x) * h;
    }
  }

  printf("pi ~ %.12f\n", area);
  return 0;
}
