/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Bank ledger: transactions are processed in parallel. The ledger balance
 * is updated while holding an OpenMP lock; a counter of processed transactions is
 * kept alongside it.
 */
#include <stdio.h>
#include <omp.h>

#define NTRANS 5000

typedef struct {
  double balance;
  int processed;
  omp_lock_t guard;
} ledger_t;

static void apply(ledger_t *ledger, double amount)
{
  omp_set_lock(&ledger->guard);
  ledger->balance += amount;
  omp_unset_lock(&ledger->guard);
  ledger->processed++;
}

int main(void)
{
  ledger_t ledger = { 0.0, 0 };
  double amounts[NTRANS];

  omp_init_lock(&ledger.guard);
  for (int t = 0; t < NTRANS; t++)
    amounts[t] = (t % 2) ? 10.0 : -4.0;

#pragma omp parallel for
  for (int t = 0; t < NTRANS; t++)
    apply(&ledger, amounts[t]);

  omp_destroy_lock(&ledger.guard);
  printf("balance=%.2f processed=%d\n", ledger.balance, ledger.processed);
  return 0;
}
