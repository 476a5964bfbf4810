/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Collect the indices of all readings above an alarm level into a compact
 * output list whose length is counted as entries are appended.
 */
#include <stdio.h>
#include <stdlib.h>

#define ALARM 90

int main(int argc, char **argv)
{
  int nread = (argc > 1) ? atoi(argv[1]) : 10000;
  int *readings = malloc(nread * sizeof(int));
  int *alarms = malloc(nread * sizeof(int));
  int nalarm = 0;

  for (int i = 0; i < nread; i++)
    readings[i] = (i * 7 + 3) % 100;

#pragma omp parallel for
  for (int i = 0; i < nread; i++) {
    if (readings[i] > ALARM)
      alarms[nalarm++] = i;
  }

  printf("%d alarms, first at %d\n", nalarm, nalarm > 0 ? alarms[0] : -1);
  free(readings);
  free(alarms);
  return 0;
}
