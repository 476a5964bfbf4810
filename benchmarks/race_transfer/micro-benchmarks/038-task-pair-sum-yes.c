/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The sum of an array computed as two halves by two explicit tasks created
 * from a single thread; the thread that created the tasks adds the two
 * halves.
 */
#include <stdio.h>

#define LEN 100000

double data[LEN];

static double range_sum(int lo, int hi)
{
  double s = 0.0;
  for (int i = lo; i < hi; i++)
    s += data[i];
  return s;
}

int main(void)
{
  double lower = 0.0, upper = 0.0, total = 0.0;

  for (int i = 0; i < LEN; i++)
    data[i] = 1.0 / (1.0 + i);

#pragma omp parallel
  {
#pragma omp single
    {
#pragma omp task
      lower = range_sum(0, LEN / 2);
#pragma omp task
      upper = range_sum(LEN / 2, LEN);

      total = lower + upper;
    }
  }

  printf("total = %.10f\n", total);
  return 0;
}
