/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Point-to-point hand-off between two threads. Thread 0 fills a message
 * buffer and raises a flag; thread 1 spins on the flag and then reads the
 * buffer. The flag is accessed with atomic read/write, with a flush
 * before the flag is raised and after it is seen.
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
#pragma omp atomic write
      ready = 1;
    } else if (tid == 1) {
      int seen = 0;
      while (!seen) {
#pragma omp atomic read
        seen = ready;
      }
#pragma omp flush
      for (int k = 0; k < MSG; k++)
        checksum += message[k];
    }
  }

  printf("checksum=%ld\n", checksum);
  return 0;
}
