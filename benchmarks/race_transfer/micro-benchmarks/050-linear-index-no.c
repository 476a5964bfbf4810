/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Interleave two coordinate arrays into one packed array of (x, y) pairs.
 * The write position advances by two per iteration and is declared linear
 * with step 2.
 */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
  int n = 3000;
  float *xs = malloc(n * sizeof(float));
  float *ys = malloc(n * sizeof(float));
  float *packed = malloc(2 * n * sizeof(float));
  int pos = 0;

  for (int i = 0; i < n; i++) {
    xs[i] = (float) i;
    ys[i] = (float) (n - i);
  }

#pragma omp parallel for linear(pos:2)
  for (int i = 0; i < n; i++) {
    packed[pos] = xs[i];
    packed[pos + 1] = ys[i];
    pos += 2;
  }

  printf("pos=%d packed[2]=%f packed[5999]=%f\n", pos, packed[2], packed[2 * n - 1]);
  free(xs);
  free(ys);
  free(packed);
  return 0;
}
