/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Point-to-point hand-off between two threads. Thread 0 fills a message
 * buffer and raises a flag; thread 1 spins on the flag and then reads the
 * buffer. Flushes are placed around the flag accesses.
 */
#include <stdio.h>
#include <omp.h>

#define MSG 64

int message[MSG];
int ready = 0;

int main(void)
{
  long checksum = 0;

#pragma omp parallel num_threads(2)
  {
    int tid = omp_get_thread_num();
    if (tid == 0) {
      for (int k = 0; k < MSG; k++)
        message[k] = k * k;
#pragma omp flush
      ready = 1;
#pragma omp flush(ready)
    } else if (tid == 1) {
      for (;;) {
#pragma omp flush(ready)
        if (ready)
          break;
      }
#pragma omp flush
      for (int k = 0; k < MSG; k++)
        checksum += message[k];
    }
  }

  printf("checksum=%ld\n", checksum);
  return 0;
}
