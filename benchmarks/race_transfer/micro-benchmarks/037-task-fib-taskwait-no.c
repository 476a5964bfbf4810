/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Recursive Fibonacci with explicit tasks. Each call spawns two child tasks
 * for the subproblems, waits for them and adds their results. Small
 * subproblems are computed serially.
 */
#include <stdio.h>
#include <stdlib.h>

#define SERIAL_CUTOFF 15

static long fib_serial(int n)
{
  return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2);
}

static long fib(int n)
{
  long x, y;

  if (n < SERIAL_CUTOFF)
    return fib_serial(n);

#pragma omp task shared(x) firstprivate(n)
  x = fib(n - 1);
#pragma omp task shared(y) firstprivate(n)
  y = fib(n - 2);
#pragma omp taskwait
  return x + y;
}

int main(int argc, char **argv)
{
  int n = argc > 1 ? atoi(argv[1]) : 30;
  long result = 0;

#pragma omp parallel
  {
#pragma omp single
    result = fib(n);
  }

  printf("fib(%d) = %ld\n", n, result);
  return 0;
}
