/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * First-order IIR smoothing filter y[i] = a*y[i-1] + (1-a)*x[i] over a
 * sampled signal, with the loop vectorised by an OpenMP simd directive.
 */
#include <stdio.h>

#define NSAMP 4096

float x[NSAMP], y[NSAMP];

int main(void)
{
  const float a = 0.9f;

  for (int i = 0; i < NSAMP; i++)
    x[i] = (i % 64 < 32) ? 1.0f : 0.0f;
  y[0] = x[0];

#pragma omp simd
  for (int i = 1; i < NSAMP; i++)
    y[i] = a * y[i - 1] + (1.0f - a) * x[i];

  printf("y[100]=%f y[4095]=%f\n", y[100], y[NSAMP - 1]);
  return 0;
}
