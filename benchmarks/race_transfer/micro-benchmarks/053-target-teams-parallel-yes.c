/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Add a bias to every element of an array on the device. A league of four
 * teams is started, and inside the teams region a parallel worksharing
 * loop runs over the array.
 */
#include <stdio.h>

#define LEN 4096

float arr[LEN];

int main(void)
{
  const float bias = 1.5f;

  for (int i = 0; i < LEN; i++)
    arr[i] = (float) i;

#pragma omp target teams num_teams(4) map(tofrom: arr[0:LEN]) map(to: bias)
  {
#pragma omp parallel for
    for (int i = 0; i < LEN; i++)
      arr[i] = arr[i] + bias;
  }

  printf("arr[0]=%f arr[4095]=%f\n", arr[0], arr[LEN - 1]);
  return 0;
}
