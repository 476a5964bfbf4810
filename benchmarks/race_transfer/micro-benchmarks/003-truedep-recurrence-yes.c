/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Running balance: balance[i+1] is the previous balance plus the
 * transaction amount of day i. The days are processed by a parallel loop
 * with an ordered clause, and a monthly statement line is printed from an
 * ordered region.
 */
#include <stdio.h>

#define DAYS 365

double balance[DAYS + 1];
double amount[DAYS];

int main(void)
{
  int day;

  balance[0] = 100.0;
  for (day = 0; day < DAYS; day++)
    amount[day] = (day % 7 == 0) ? -20.0 : 5.0;

#pragma omp parallel for ordered schedule(static)
  for (day = 0; day < DAYS; day++) {
    balance[day + 1] = balance[day] + amount[day];
#pragma omp ordered
    {
      if (day % 30 == 29)
        printf("day %3d: %.2f\n", day + 1, balance[day + 1]);
    }
  }

  printf("final balance = %.2f\n", balance[DAYS]);
  return 0;
}
