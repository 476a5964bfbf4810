/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Tabulate 4/(1+x^2) on the midpoints of [0,1] with a taskloop, then sum
 * the table serially (midpoint rule for pi).
 */
#include <stdio.h>
#include <stdlib.h>

#define STEPS 1000000

int main(void)
{
  const double h = 1.0 / STEPS;
  double *f = malloc(STEPS * sizeof(double));
  double area = 0.0;

#pragma omp parallel
#pragma omp single
  {
#pragma omp taskloop grainsize(10000)
    for (long k = 0; k < STEPS; k++) {
      double x = (k + 0.5) * h;
      f[k] = 4.0 / (1.0 + x * x) * h;
    }
  }

  for (long k = 0; k < STEPS; k++)
    area += f[k];
  printf("pi ~ %.12f\n", area);
  free(f);
  return 0;
}
