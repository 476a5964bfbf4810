/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Normalise a vector by its Euclidean norm. One thread computes the norm
 * in a single construct; the team then divides a copy of the elements by it.
 */
#include <stdio.h>
#include <math.h>

#define LEN 5000

double v[LEN], w[LEN];
double norm;

int main(void)
{
  for (int i = 0; i < LEN; i++)
    v[i] = (double) (i % 13) - 6.0;

#pragma omp parallel
  {
#pragma omp single
    {
      double s = 0.0;
      for (int i = 0; i < LEN; i++)
        s += v[i] * v[i];
      norm = sqrt(s);
    }

#pragma omp for
    for (int i = 0; i < LEN; i++)
      w[i] = v[i] / norm;
  }

  printf("norm=%f w[7]=%f\n", norm, w[7]);
  return 0;
}
