/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Compound growth factor over many periods. Each thread multiplies the
 * factors of the periods it is given into a local product and then folds
 * its local product into the overall result.
 */
#include <stdio.h>
#include <omp.h>

#define PERIODS 1200

int main(void)
{
  double rate[PERIODS];
  double growth = 1.0;
  int positive = 0;

  for (int p = 0; p < PERIODS; p++)
    rate[p] = 0.0005 * ((p % 5) - 1);

#pragma omp parallel
  {
    double local = 1.0;
#pragma omp for reduction(+:positive)
    for (int p = 0; p < PERIODS; p++) {
      local *= 1.0 + rate[p];
      if (rate[p] > 0.0)
        positive++;
    }
    growth *= local;
  }

  printf("growth=%.6f over %d positive periods (threads=%d)\n", growth, positive,
         omp_get_max_threads());
  return 0;
}
