/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A small task graph: a producer fills a vector; a consumer task takes its
 * sum while a second task rescales the vector. Both follow the producer
 * through an "in" dependence on the vector.
 */
#include <stdio.h>

#define LEN 512

int main(void)
{
  double vec[LEN];
  double sum = 0.0;

#pragma omp parallel
#pragma omp single
  {
#pragma omp task depend(out: vec) shared(vec)
    for (int i = 0; i < LEN; i++)
      vec[i] = i + 1.0;

#pragma omp task depend(in: vec) shared(vec, sum)
    {
      double s = 0.0;
      for (int i = 0; i < LEN; i++)
        s += vec[i];
      sum = s;
    }

#pragma omp task depend(in: vec) shared(vec)
    for (int i = 0; i < LEN; i++)
      vec[i] *= 0.5;

#pragma omp taskwait
    printf("sum=%f vec[1]=%f\n", sum, vec[1]);
  }
  return 0;
}
