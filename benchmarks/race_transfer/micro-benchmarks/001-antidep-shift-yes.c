/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Left shift of a vector in place: every element takes the value of its
 * right-hand neighbour plus one. The loop is split over the threads of a
 * parallel region with a worksharing loop.
 */
#include <stdio.h>

#define LEN 1000

int main(void)
{
  int i;
  int a[LEN];

  for (i = 0; i < LEN; i++)
    a[i] = i;

#pragma omp parallel for
  for (i = 0; i < LEN - 1; i++)
    a[i] = a[i + 1] + 1;

  printf("a[500]=%d\n", a[500]);
  return 0;
}
