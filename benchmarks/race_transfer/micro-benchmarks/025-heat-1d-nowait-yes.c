/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Explicit finite-difference solution of the 1-D heat equation on a rod
 * with fixed end temperatures. One parallel region spans all time steps;
 * each step computes the new temperatures into a scratch array and copies
 * them back, and the threads meet at a barrier at the end of every step.
 */
#include <stdio.h>

#define NX 10000
#define NSTEPS 400

double u[NX], unew[NX];

int main(void)
{
  const double r = 0.4;

  for (int i = 0; i < NX; i++)
    u[i] = 0.0;
  u[0] = 100.0;
  u[NX - 1] = 50.0;

#pragma omp parallel
  {
    for (int step = 0; step < NSTEPS; step++) {
#pragma omp for schedule(static) nowait
      for (int i = 1; i < NX - 1; i++)
        unew[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1]);

#pragma omp for schedule(static) nowait
      for (int i = 1; i < NX - 1; i++)
        u[i] = unew[i];

#pragma omp barrier
    }
  }

  printf("u[1]=%f u[10]=%f u[NX-2]=%f\n", u[1], u[10], u[NX - 2]);
  return 0;
}
