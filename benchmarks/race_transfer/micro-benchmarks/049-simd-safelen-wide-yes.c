/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Propagate a value three cells ahead along a 1-D lattice: cell i+3 is
 * set from cell i and a local weight. The loop is vectorised with an
 * OpenMP simd directive with safelen(8).
 */
#include <stdio.h>

#define NCELL 2048
#define STRIDE 3

double cell[NCELL + STRIDE], weight[NCELL];

int main(void)
{
  for (int i = 0; i < NCELL + STRIDE; i++)
    cell[i] = 1.0;
  for (int i = 0; i < NCELL; i++)
    weight[i] = 0.5 + 0.001 * (i % 10);

#pragma omp simd safelen(8)
  for (int i = 0; i < NCELL; i++)
    cell[i + STRIDE] = cell[i] * weight[i] + 0.1;

  printf("cell[100]=%f cell[%d]=%f\n", cell[100], NCELL, cell[NCELL]);
  return 0;
}
