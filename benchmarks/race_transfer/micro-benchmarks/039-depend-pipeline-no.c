/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A three-stage pipeline expressed with task dependences on array
 * sections: generate a block, filter it, and compute two statistics of the
 * filtered block in two concurrent reader tasks. A last task prints the
 * statistics; the generating thread waits for all tasks and reports one
 * filtered value.
 */
#include <stdio.h>

#define BLK 1024

double block[BLK], filtered[BLK];
double mean, peak;

int main(void)
{
#pragma omp parallel
#pragma omp single
  {
#pragma omp task depend(out: block[0:BLK])
    for (int i = 0; i < BLK; i++)
      block[i] = (double) ((i * 17) % 64);

#pragma omp task depend(in: block[0:BLK]) depend(out: filtered[0:BLK])
    for (int i = 0; i < BLK; i++)
      filtered[i] = block[i] > 32.0 ? block[i] - 32.0 : 0.0;

#pragma omp task depend(in: filtered[0:BLK]) depend(out: mean)
    {
      double s = 0.0;
      for (int i = 0; i < BLK; i++)
        s += filtered[i];
      mean = s / BLK;
    }

#pragma omp task depend(in: filtered[0:BLK]) depend(out: peak)
    {
      double m = 0.0;
      for (int i = 0; i < BLK; i++)
        if (filtered[i] > m)
          m = filtered[i];
      peak = m;
    }

#pragma omp task depend(in: mean, peak)
    printf("mean=%f peak=%f\n", mean, peak);

#pragma omp taskwait
    printf("filtered[10]=%f\n", filtered[10]);
  }
  return 0;
}
