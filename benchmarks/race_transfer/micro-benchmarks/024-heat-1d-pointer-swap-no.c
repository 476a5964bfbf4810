/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Explicit finite-difference solution of the 1-D heat equation on a rod
 * with fixed end temperatures. One parallel region spans all time steps;
 * the two time levels are exchanged by swapping pointers in a single
 * construct after each step.
 */
#include <stdio.h>
#include <stdlib.h>

#define NX 10000
#define NSTEPS 400

int main(void)
{
  double *u = malloc(NX * sizeof(double));
  double *unew = malloc(NX * sizeof(double));
  const double r = 0.4;

  for (int i = 0; i < NX; i++)
    u[i] = 0.0;
  u[0] = 100.0;
  u[NX - 1] = 50.0;
  unew[0] = u[0];
  unew[NX - 1] = u[NX - 1];

#pragma omp parallel
  {
    for (int step = 0; step < NSTEPS; step++) {
#pragma omp for schedule(static)
      for (int i = 1; i < NX - 1; i++)
        unew[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1]);

#pragma omp single
      {
        double *tmp = u;
        u = unew;
        unew = tmp;
      }
    }
  }

  printf("u[1]=%f u[10]=%f u[NX-2]=%f\n", u[1], u[10], u[NX - 2]);
  free(u);
  free(unew);
  return 0;
}
