/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Largest absolute residual of a linear model y = 2x + 1 over noisy data;
 * the comparison and the update of the running maximum sit in a critical
 * section.
 */
#include <stdio.h>
#include <math.h>

#define NPTS 2048

int main(void)
{
  double xs[NPTS], ys[NPTS];
  double max_resid = 0.0;
  int worst = -1;

  for (int i = 0; i < NPTS; i++) {
    xs[i] = i * 0.01;
    ys[i] = 2.0 * xs[i] + 1.0 + 0.05 * sin(i * 1.7);
  }

#pragma omp parallel for
  for (int i = 0; i < NPTS; i++) {
    double r = fabs(ys[i] - (2.0 * xs[i] + 1.0));
#pragma omp critical
    {
      if (r > max_resid) {
        max_resid = r;
        worst = i;
      }
    }
  }

  printf("max residual %g at %d\n", max_resid, worst);
  return 0;
}
