/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A work queue of jobs is drained by two sections: one handles the even
 * jobs, the other the odd ones. Both decrement a shared count of remaining
 * jobs and add their job cost to a running total.
 */
#include <stdio.h>

#define NJOBS 64

int cost[NJOBS];

int main(void)
{
  int remaining = NJOBS;
  long spent = 0;

  for (int j = 0; j < NJOBS; j++)
    cost[j] = 1 + (j * 11) % 7;

#pragma omp parallel sections
  {
#pragma omp section
    for (int j = 0; j < NJOBS; j += 2) {
      spent += cost[j];
      remaining--;
    }
#pragma omp section
    for (int j = 1; j < NJOBS; j += 2) {
      spent += cost[j];
      remaining--;
    }
  }

  printf("remaining=%d spent=%ld\n", remaining, spent);
  return 0;
}
