/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Accounts with a nestable lock each. A transfer locks the source account
 * and calls withdraw(), which locks the same account again; deposits into
 * the target account lock it separately. A global audit counter is updated
 * in a named critical section.
 */
#include <stdio.h>
#include <omp.h>

#define NACC 8
#define NOPS 4000

typedef struct {
  long cents;
  long ops;
  omp_nest_lock_t lock;
} account_t;

static account_t acct[NACC];
static long audit_count = 0;

static void withdraw(account_t *a, long amount)
{
  omp_set_nest_lock(&a->lock);
  a->cents -= amount;
  a->ops++;
  omp_unset_nest_lock(&a->lock);
}

static void deposit(account_t *a, long amount)
{
  omp_set_nest_lock(&a->lock);
  a->cents += amount;
  a->ops++;
  omp_unset_nest_lock(&a->lock);
}

static void transfer(int from, int to, long amount)
{
  omp_set_nest_lock(&acct[from].lock);
  if (acct[from].cents >= amount)
    withdraw(&acct[from], amount);
  else
    amount = 0;
  omp_unset_nest_lock(&acct[from].lock);

  deposit(&acct[to], amount);

#pragma omp critical(audit)
  audit_count++;
}

int main(void)
{
  long total = 0;

  for (int k = 0; k < NACC; k++) {
    acct[k].cents = 100000;
    acct[k].ops = 0;
    omp_init_nest_lock(&acct[k].lock);
  }

#pragma omp parallel for schedule(dynamic, 16)
  for (int op = 0; op < NOPS; op++) {
    int from = op % NACC;
    int to = (op * 5 + 3) % NACC;
    if (from != to)
      transfer(from, to, 25 + op % 10);
  }

  for (int k = 0; k < NACC; k++) {
    total += acct[k].cents;
    omp_destroy_nest_lock(&acct[k].lock);
  }
  printf("total=%ld audits=%ld\n", total, audit_count);
  return 0;
}
