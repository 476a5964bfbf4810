/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Dot product of two vectors offloaded to an accelerator with a combined
 * target teams distribute parallel for construct. The result scalar is
 * mapped tofrom.
 */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
  const int n = 1 << 20;
  double *x = malloc(n * sizeof(double));
  double *y = malloc(n * sizeof(double));
  double dot = 0.0;

  for (int i = 0; i < n; i++) {
    x[i] = 1.0;
    y[i] = (i % 2) ? 2.0 : 0.5;
  }

#pragma omp target teams distribute parallel for map(to: x[0:n], y[0:n]) map(tofrom: dot)
  for (int i = 0; i < n; i++)
    dot += x[i] * y[i];

  printf("dot = %f\n", dot);
  free(x);
  free(y);
  return 0;
}
