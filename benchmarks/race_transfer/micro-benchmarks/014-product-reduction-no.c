/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Compound growth factor over many periods, computed with a multiplicative
 * reduction over the per-period factors.
 */
#include <stdio.h>

#define PERIODS 1200

int main(void)
{
  double rate[PERIODS];
  double growth = 1.0;
  int positive = 0;

  for (int p = 0; p < PERIODS; p++)
    rate[p] = 0.0005 * ((p % 5) - 1);

#pragma omp parallel for reduction(*:growth) reduction(+:positive)
  for (int p = 0; p < PERIODS; p++) {
    growth *= 1.0 + rate[p];
    if (rate[p] > 0.0)
      positive++;
  }

  printf("growth=%.6f over %d positive periods\n", growth, positive);
  return 0;
}
