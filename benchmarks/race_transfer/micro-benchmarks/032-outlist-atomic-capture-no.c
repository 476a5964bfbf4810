/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Collect the indices of all readings above an alarm level into a compact
 * output list. A slot of the list is claimed with an atomic capture of the
 * running length.
 */
#include <stdio.h>

#define NREAD 10000
#define ALARM 90

int readings[NREAD];
int alarms[NREAD];

int main(void)
{
  int nalarm = 0;

  for (int i = 0; i < NREAD; i++)
    readings[i] = (i * 7 + 3) % 100;

#pragma omp parallel for
  for (int i = 0; i < NREAD; i++) {
    if (readings[i] > ALARM) {
      int slot;
#pragma omp atomic capture
      slot = nalarm++;
      alarms[slot] = i;
    }
  }

  printf("%d alarms\n", nalarm);
  return 0;
}
