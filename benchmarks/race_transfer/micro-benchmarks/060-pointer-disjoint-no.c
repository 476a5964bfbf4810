/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A helper that adds a constant to one vector while copying from another,
 * called with the two halves of one allocated buffer.
 */
#include <stdio.h>
#include <stdlib.h>

static void shift_add(double *dst, const double *src, int n, double c)
{
#pragma omp parallel for
  for (int i = 0; i < n; i++)
    dst[i] = src[i] + c;
}

int main(void)
{
  int n = 1000;
  double *buf = malloc(2 * n * sizeof(double));

  for (int i = 0; i < 2 * n; i++)
    buf[i] = i;

  double *front = buf;
  double *back = buf + n;
  shift_add(back, front, n, 1.0);

  printf("buf[%d]=%f\n", 2 * n - 1, buf[2 * n - 1]);
  free(buf);
  return 0;
}
