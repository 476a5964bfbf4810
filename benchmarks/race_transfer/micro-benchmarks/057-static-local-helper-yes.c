/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Pseudo-random jitter added to a set of sample times. The helper keeps
 * its generator state in a static local variable between calls, counts
 * its calls per thread in a threadprivate variable, and is called from
 * every iteration of a parallel loop.
 */
#include <stdio.h>
#include <stdlib.h>

static int calls_here = 0;
#pragma omp threadprivate(calls_here)

static double next_jitter(void)
{
  static unsigned int state = 12345u;
  calls_here++;
  state = state * 1103515245u + 12345u;
  return ((state >> 16) & 0x7fff) / 32768.0 - 0.5;
}

int main(int argc, char **argv)
{
  int ns = (argc > 1) ? atoi(argv[1]) : 1000;
  double *t = malloc(ns * sizeof(double));
  int total_calls = 0;

#pragma omp parallel reduction(+:total_calls)
  {
#pragma omp for
    for (int i = 0; i < ns; i++)
      t[i] = i * 0.01 + 0.001 * next_jitter();
    total_calls += calls_here;
  }

  printf("t[0]=%f t[last]=%f calls=%d\n", t[0], t[ns - 1], total_calls);
  free(t);
  return 0;
}
