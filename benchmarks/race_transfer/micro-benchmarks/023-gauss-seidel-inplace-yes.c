/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Steady-state temperature of a rectangular plate (2-D Laplace equation)
 * by in-place relaxation, written in the style of a stencil kernel suite:
 * initialisation, a timed kernel, and a checksum printed at the end.
 *
 * The plate is stored as one malloc'd block indexed through a macro. The
 * top edge is held at 100 degrees, the left edge at 50, the other edges at
 * 0. Each sweep replaces every interior point by the average of its four
 * neighbours, updating the grid in place; the rows of a sweep are shared
 * out over the threads. After the sweeps, the residual of the discrete
 * Laplace operator is computed with a reduction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <omp.h>

#define NX 256
#define NY 192
#define TSTEPS 100
#define IDX(i, j) ((i) * NY + (j))

static void init_plate(double *u)
{
  for (int i = 0; i < NX; i++)
    for (int j = 0; j < NY; j++) {
      if (i == 0)
        u[IDX(i, j)] = 100.0;
      else if (j == 0)
        u[IDX(i, j)] = 50.0;
      else
        u[IDX(i, j)] = 0.0;
    }
}

static void kernel_relax(int tsteps, double *u)
{
  for (int t = 0; t < tsteps; t++) {
#pragma omp parallel for schedule(static)
    for (int i = 1; i < NX - 1; i++) {
      for (int j = 1; j < NY - 1; j++) {
        u[IDX(i, j)] = 0.25 * (u[IDX(i - 1, j)] + u[IDX(i + 1, j)] +
                               u[IDX(i, j - 1)] + u[IDX(i, j + 1)]);
      }
    }
  }
}

static double residual(const double *u)
{
  double res = 0.0;
#pragma omp parallel for reduction(+:res)
  for (int i = 1; i < NX - 1; i++)
    for (int j = 1; j < NY - 1; j++) {
      double r = u[IDX(i - 1, j)] + u[IDX(i + 1, j)] + u[IDX(i, j - 1)] +
                 u[IDX(i, j + 1)] - 4.0 * u[IDX(i, j)];
      res += r * r;
    }
  return sqrt(res);
}

static double checksum(const double *u)
{
  double s = 0.0;
  for (int i = 0; i < NX; i++)
    for (int j = 0; j < NY; j++)
      s += u[IDX(i, j)] * (1 + (i + j) % 3);
  return s;
}

int main(int argc, char **argv)
{
  int tsteps = (argc > 1) ? atoi(argv[1]) : TSTEPS;
  double *u = malloc((size_t) NX * NY * sizeof(double));
  if (!u) {
    fprintf(stderr, "allocation failed\n");
    return 1;
  }

  init_plate(u);
  double t0 = omp_get_wtime();
  kernel_relax(tsteps, u);
  double t1 = omp_get_wtime();

  printf("sweeps      : %d\n", tsteps);
  printf("residual    : %.6e\n", residual(u));
  printf("checksum    : %.6f\n", checksum(u));
  printf("centre      : %.6f\n", u[IDX(NX / 2, NY / 2)]);
  printf("kernel time : %.3f s on %d threads\n", t1 - t0, omp_get_max_threads());

  free(u);
  return 0;
}
