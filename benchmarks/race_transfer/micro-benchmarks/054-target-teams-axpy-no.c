/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * y = a*x + y on the device. The data stay resident in a target data
 * region across several repetitions; each repetition distributes the
 * iterations over a league of teams and the threads of each team.
 */
#include <stdio.h>
#include <stdlib.h>

#define REPS 10

static void axpy(int n, float a, const float *x, float *y)
{
#pragma omp target teams distribute parallel for num_teams(8) thread_limit(128)
  for (int i = 0; i < n; i++)
    y[i] = a * x[i] + y[i];
}

int main(void)
{
  int n = 100000;
  float *x = malloc(n * sizeof(float));
  float *y = malloc(n * sizeof(float));

  for (int i = 0; i < n; i++) {
    x[i] = 0.5f;
    y[i] = (float) (i % 4);
  }

#pragma omp target data map(to: x[0:n]) map(tofrom: y[0:n])
  {
    for (int r = 0; r < REPS; r++)
      axpy(n, 2.0f, x, y);
  }

  printf("y[0]=%f y[3]=%f\n", y[0], y[3]);
  free(x);
  free(y);
  return 0;
}
