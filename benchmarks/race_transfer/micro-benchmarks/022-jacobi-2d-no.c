/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Jacobi relaxation of the 2-D Laplace equation on a square plate whose top
 * edge is held at 100 degrees. Two grids are used; each sweep reads one and
 * writes the other, and the maximum change is tracked for convergence.
 */
#include <stdio.h>
#include <math.h>

#define N 128
#define MAX_ITER 500
#define TOL 1.0e-4

static double u[N][N];
static double unew[N][N];

int main(void)
{
  int iter;
  double diff = 0.0;

  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      u[i][j] = (i == 0) ? 100.0 : 0.0;
      unew[i][j] = u[i][j];
    }

  for (iter = 0; iter < MAX_ITER; iter++) {
    diff = 0.0;

#pragma omp parallel for collapse(2) reduction(max:diff)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++) {
        unew[i][j] = 0.25 * (u[i - 1][j] + u[i + 1][j] + u[i][j - 1] + u[i][j + 1]);
        double d = fabs(unew[i][j] - u[i][j]);
        if (d > diff)
          diff = d;
      }

#pragma omp parallel for collapse(2)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        u[i][j] = unew[i][j];

    if (diff < TOL)
      break;
  }

  printf("iterations=%d diff=%e centre=%f\n", iter, diff, u[N / 2][N / 2]);
  return 0;
}
