/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Element-wise scaling of a matrix by row factors. The row loop is
 * parallel; the column loop runs inside it.
 */
#include <stdio.h>

#define M 100
#define N 100

double mat[M][N];
double rowscale[M];

int main(void)
{
  int i, j;

  for (i = 0; i < M; i++) {
    rowscale[i] = 1.0 / (i + 1);
    for (j = 0; j < N; j++)
      mat[i][j] = i * N + j;
  }

#pragma omp parallel for
  for (i = 0; i < M; i++)
    for (j = 0; j < N; j++)
      mat[i][j] *= rowscale[i];

  printf("mat[50][50] = %f\n", mat[50][50]);
  return 0;
}
