/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Read a configuration value on the primary thread, then let the whole team
 * apply it to a data array in a worksharing loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define LEN 2000

static int read_threshold(void)
{
  const char *s = getenv("CLIP_THRESHOLD");
  return s ? atoi(s) : 40;
}

int main(void)
{
  int data[LEN];
  int threshold = 0;

  for (int i = 0; i < LEN; i++)
    data[i] = (i * 31) % 97;

#pragma omp parallel shared(threshold)
  {
#pragma omp master
    {
      threshold = read_threshold();
      printf("threads: %d\n", omp_get_num_threads());
    }

#pragma omp for
    for (int i = 0; i < LEN; i++)
      if (data[i] > threshold)
        data[i] = threshold;
  }

  printf("data[3]=%d\n", data[3]);
  return 0;
}
