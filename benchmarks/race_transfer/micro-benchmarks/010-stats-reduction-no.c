/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Summary statistics of a sample: the minimum and the sum. The region runs
 * in parallel only for samples large enough to pay for the threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <float.h>

#define CUTOFF 100

int main(void)
{
  int n = 4000;
  double *x = malloc(n * sizeof(double));
  double sum = 0.0, lo = DBL_MAX;

  for (int i = 0; i < n; i++)
    x[i] = (double) ((i * 37) % 101) / 10.0;

#pragma omp parallel for if(n > CUTOFF) reduction(+:sum) reduction(min:lo)
  for (int i = 0; i < n; i++) {
    sum += x[i];
    if (x[i] < lo)
      lo = x[i];
  }

  printf("sum=%f min=%f mean=%f\n", sum, lo, sum / n);
  free(x);
  return 0;
}
