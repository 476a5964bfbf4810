/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Scatter a vector through an index table. The table is generated as
 * perm[i] = (i * 7919) mod 1024, where 7919 is odd and the length is a
 * power of two, and it is checked before use.
 */
#include <stdio.h>
#include <stdlib.h>

#define LEN 1024

int perm[LEN];
double src[LEN], dst[LEN];

int main(void)
{
  int seen[LEN] = {0};

  for (int i = 0; i < LEN; i++) {
    perm[i] = (int) (((long) i * 7919) % LEN);
    src[i] = 0.5 * i;
  }
  for (int i = 0; i < LEN; i++) {
    if (seen[perm[i]]++) {
      fprintf(stderr, "index table has a repeated entry\n");
      return 1;
    }
  }

#pragma omp parallel for
  for (int i = 0; i < LEN; i++)
    dst[perm[i]] = src[i] * 2.0 + 1.0;

  printf("dst[0]=%f dst[1023]=%f\n", dst[0], dst[LEN - 1]);
  return 0;
}
