/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Three independent preprocessing steps of a signal pipeline run as
 * parallel sections: a moving average, a first difference and a clipped
 * copy. All three read the raw signal.
 */
#include <stdio.h>

#define LEN 4096

float raw[LEN], smooth[LEN], diff[LEN], clipped[LEN];

int main(void)
{
  for (int i = 0; i < LEN; i++)
    raw[i] = (float) ((i * 13) % 29) - 14.0f;

#pragma omp parallel sections
  {
#pragma omp section
    {
      smooth[0] = raw[0];
      for (int i = 1; i < LEN - 1; i++)
        smooth[i] = (raw[i - 1] + raw[i] + raw[i + 1]) / 3.0f;
      smooth[LEN - 1] = raw[LEN - 1];
    }
#pragma omp section
    {
      diff[0] = 0.0f;
      for (int i = 1; i < LEN; i++)
        diff[i] = raw[i] - raw[i - 1];
    }
#pragma omp section
    {
      for (int i = 0; i < LEN; i++)
        clipped[i] = raw[i] > 10.0f ? 10.0f : (raw[i] < -10.0f ? -10.0f : raw[i]);
    }
  }

  printf("%f %f %f\n", smooth[100], diff[100], clipped[100]);
  return 0;
}
