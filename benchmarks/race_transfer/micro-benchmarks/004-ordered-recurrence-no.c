/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Running balance with an expensive per-day fee model. The fee of each day
 * is computed freely in parallel; the accumulation into the balance array
 * is placed in an ordered region of the loop.
 */
#include <stdio.h>
#include <math.h>

#define DAYS 365

double balance[DAYS + 1];
double amount[DAYS];

static double fee_model(int day)
{
  double f = 0.0;
  for (int k = 1; k <= 50; k++)
    f += sin(0.01 * day * k) / (k * k);
  return 0.1 * fabs(f);
}

int main(void)
{
  balance[0] = 100.0;
  for (int day = 0; day < DAYS; day++)
    amount[day] = (day % 7 == 0) ? -20.0 : 5.0;

#pragma omp parallel for ordered schedule(dynamic, 4)
  for (int day = 0; day < DAYS; day++) {
    double fee = fee_model(day);
#pragma omp ordered
    balance[day + 1] = balance[day] + amount[day] - fee;
  }

  printf("final balance = %.4f\n", balance[DAYS]);
  return 0;
}
