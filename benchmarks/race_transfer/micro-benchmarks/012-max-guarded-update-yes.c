/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Largest absolute residual of a linear model y = 2x + 1 over noisy data,
 * together with the total squared residual. A residual is compared with the
 * running maximum first and, if larger, the maximum is updated inside a
 * critical section.
 */
#include <stdio.h>
#include <math.h>

#define NPTS 2048

int main(void)
{
  double xs[NPTS], ys[NPTS];
  double max_resid = 0.0, sq_total = 0.0;

  for (int i = 0; i < NPTS; i++) {
    xs[i] = i * 0.01;
    ys[i] = 2.0 * xs[i] + 1.0 + 0.05 * sin(i * 1.7);
  }

#pragma omp parallel for reduction(+:sq_total)
  for (int i = 0; i < NPTS; i++) {
    double r = fabs(ys[i] - (2.0 * xs[i] + 1.0));
    sq_total += r * r;
    if (r > max_resid) {
#pragma omp critical
      {
        if (r > max_resid)
          max_resid = r;
      }
    }
  }

  printf("max residual %g, rms %g\n", max_resid, sqrt(sq_total / NPTS));
  return 0;
}
