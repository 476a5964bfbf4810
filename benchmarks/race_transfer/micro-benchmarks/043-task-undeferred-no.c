/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Tiled accumulation where tasks for small tiles are made undeferred with
 * an if clause. Every tile adds its partial sum into one shared total, and
 * all tiles are small enough here to take the undeferred path.
 */
#include <stdio.h>

#define LEN 8192
#define TILE 256
#define DEFER_MIN 100000

double x[LEN];

int main(void)
{
  double total = 0.0;

  for (int i = 0; i < LEN; i++)
    x[i] = (i % 10) * 0.1;

#pragma omp parallel
#pragma omp single
  {
    for (int start = 0; start < LEN; start += TILE) {
      int len = (start + TILE <= LEN) ? TILE : LEN - start;
#pragma omp task if(len >= DEFER_MIN) firstprivate(start, len) shared(total)
      {
        double s = 0.0;
        for (int i = start; i < start + len; i++)
          s += x[i];
        total += s;
      }
    }
    printf("total=%f\n", total);
  }
  return 0;
}
