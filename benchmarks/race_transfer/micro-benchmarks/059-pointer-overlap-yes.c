/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A helper that adds a constant to one vector while copying from another,
 * called with two views into the same allocated buffer.
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
  double *buf = malloc((n + 1) * sizeof(double));

  for (int i = 0; i <= n; i++)
    buf[i] = i;

  double *front = buf;
  double *back = buf + 1;
  shift_add(back, front, n, 1.0);

  printf("buf[%d]=%f\n", n, buf[n]);
  free(buf);
  return 0;
}
