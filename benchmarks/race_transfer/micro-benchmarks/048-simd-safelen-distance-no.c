/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Four interleaved running sums over a signal stored as groups of four
 * channels: sample i adds the value four positions earlier. The loop is
 * vectorised with an OpenMP simd directive with safelen(4).
 */
#include <stdio.h>

#define NSAMP 4096
#define NCHAN 4

double acc[NSAMP], sig[NSAMP];

int main(void)
{
  for (int i = 0; i < NSAMP; i++)
    sig[i] = (double) (i % NCHAN) + 0.25;
  for (int i = 0; i < NCHAN; i++)
    acc[i] = sig[i];

#pragma omp simd safelen(4)
  for (int i = NCHAN; i < NSAMP; i++)
    acc[i] = acc[i - NCHAN] + sig[i];

  printf("%f %f %f %f\n", acc[NSAMP - 4], acc[NSAMP - 3], acc[NSAMP - 2], acc[NSAMP - 1]);
  return 0;
}
