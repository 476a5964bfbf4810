/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Scale a signal and remember the last scaled sample in a scalar that is
 * printed after the loop; the scalar is lastprivate.
 */
#include <stdio.h>

#define N 256

int main(void)
{
  float signal[N], scaled[N];
  float last = 0.0f;
  const float gain = 2.5f;
  int i;

  for (i = 0; i < N; i++)
    signal[i] = (float) (i % 17) - 8.0f;

#pragma omp parallel for lastprivate(last)
  for (i = 0; i < N; i++) {
    last = signal[i] * gain;
    scaled[i] = last;
  }

  printf("last=%f scaled[10]=%f\n", last, scaled[10]);
  return 0;
}
