/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Small dense solves for many independent 3x3 systems. The helper uses a
 * file-scope work matrix that is declared threadprivate, and writes the
 * solution into the caller's output slot.
 */
#include <stdio.h>
#include <math.h>

#define NSYS 5000

static double work[3][4];
#pragma omp threadprivate(work)

static void solve3(const double a[3][3], const double b[3], double x[3])
{
  for (int r = 0; r < 3; r++) {
    for (int c = 0; c < 3; c++)
      work[r][c] = a[r][c];
    work[r][3] = b[r];
  }
  for (int p = 0; p < 3; p++) {
    for (int r = p + 1; r < 3; r++) {
      double f = work[r][p] / work[p][p];
      for (int c = p; c < 4; c++)
        work[r][c] -= f * work[p][c];
    }
  }
  for (int r = 2; r >= 0; r--) {
    double s = work[r][3];
    for (int c = r + 1; c < 3; c++)
      s -= work[r][c] * x[c];
    x[r] = s / work[r][r];
  }
}

static double sol[NSYS][3];

int main(void)
{
#pragma omp parallel for
  for (int k = 0; k < NSYS; k++) {
    double a[3][3] = { { 4.0 + k % 5, 1.0, 0.0 },
                       { 1.0, 3.0, 1.0 },
                       { 0.0, 1.0, 2.0 + k % 3 } };
    double b[3] = { 1.0, 2.0, (double) (k % 7) };
    solve3((const double (*)[3]) a, b, sol[k]);
  }

  double norm = 0.0;
  for (int k = 0; k < NSYS; k++)
    norm += fabs(sol[k][0]) + fabs(sol[k][1]) + fabs(sol[k][2]);
  printf("norm=%f\n", norm);
  return 0;
}
