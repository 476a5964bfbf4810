/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Shifted copy: the output vector receives the input vector moved one
 * position to the left, plus one. Input and output are distinct arrays.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char *argv[])
{
  int len = 1000;
  if (argc > 1)
    len = atoi(argv[1]);

  int *src = (int *) malloc(sizeof(int) * len);
  int *dst = (int *) malloc(sizeof(int) * len);

  for (int i = 0; i < len; i++)
    src[i] = i;

#pragma omp parallel for
  for (int i = 0; i < len - 1; i++)
    dst[i] = src[i + 1] + 1;
  dst[len - 1] = 0;

  printf("dst[%d]=%d\n", len / 2, dst[len / 2]);
  free(src);
  free(dst);
  return 0;
}
