/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Downward sweep over a 2-D grid: each row is the row above plus a source
 * term. Both loops of the sweep are collapsed into one parallel loop.
 */
#include <stdio.h>

#define NROW 200
#define NCOL 300

double grid[NROW][NCOL];
double source[NROW][NCOL];

int main(void)
{
  int i, j;

  for (i = 0; i < NROW; i++)
    for (j = 0; j < NCOL; j++) {
      grid[i][j] = 0.0;
      source[i][j] = 0.001 * (i + j);
    }
  for (j = 0; j < NCOL; j++)
    grid[0][j] = 1.0;

#pragma omp parallel for collapse(2)
  for (i = 1; i < NROW; i++)
    for (j = 0; j < NCOL; j++)
      grid[i][j] = grid[i - 1][j] + source[i][j];

  printf("grid[%d][%d] = %f\n", NROW - 1, NCOL / 2, grid[NROW - 1][NCOL / 2]);
  return 0;
}
