/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * General matrix multiply C = alpha * A * B + beta * C, in the style of a
 * linear algebra kernel suite: deterministic initialisation, a timed
 * parallel kernel, a serial reference computation and a comparison of the
 * two results.
 *
 * The parallel kernel distributes the rows of C over the threads and uses
 * the i-k-j loop order so that the innermost loop walks rows of B and C
 * with unit stride.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <omp.h>

#define NI 160
#define NJ 144
#define NK 128

static double A[NI][NK];
static double B[NK][NJ];
static double C[NI][NJ];
static double Cref[NI][NJ];

static void init_array(double *alpha, double *beta)
{
  *alpha = 1.5;
  *beta = 1.2;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++) {
      C[i][j] = (double) ((i * j + 1) % NI) / NI;
      Cref[i][j] = C[i][j];
    }
  for (int i = 0; i < NI; i++)
    for (int k = 0; k < NK; k++)
      A[i][k] = (double) (i * (k + 1) % NK) / NK;
  for (int k = 0; k < NK; k++)
    for (int j = 0; j < NJ; j++)
      B[k][j] = (double) (k * (j + 2) % NJ) / NJ;
}

static void kernel_gemm(double alpha, double beta)
{
#pragma omp parallel for schedule(static)
  for (int i = 0; i < NI; i++) {
    for (int j = 0; j < NJ; j++)
      C[i][j] *= beta;
    for (int k = 0; k < NK; k++) {
      double a_ik = alpha * A[i][k];
      for (int j = 0; j < NJ; j++)
        C[i][j] += a_ik * B[k][j];
    }
  }
}

static void reference_gemm(double alpha, double beta)
{
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++) {
      double acc = 0.0;
      for (int k = 0; k < NK; k++)
        acc += A[i][k] * B[k][j];
      Cref[i][j] = beta * Cref[i][j] + alpha * acc;
    }
}

static double max_abs_diff(void)
{
  double worst = 0.0;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++) {
      double d = fabs(C[i][j] - Cref[i][j]);
      if (d > worst)
        worst = d;
    }
  return worst;
}

static double checksum(void)
{
  double s = 0.0;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++)
      s += C[i][j];
  return s;
}

int main(void)
{
  double alpha, beta;

  init_array(&alpha, &beta);

  double t0 = omp_get_wtime();
  kernel_gemm(alpha, beta);
  double t1 = omp_get_wtime();
  reference_gemm(alpha, beta);

  double err = max_abs_diff();
  printf("checksum = %.6f\n", checksum());
  printf("max |C - Cref| = %.3e (%s)\n", err, err < 1e-9 ? "match" : "mismatch");
  printf("kernel time = %.4f s, %.2f GFLOP/s\n", t1 - t0,
         2.0 * NI * NJ * NK / ((t1 - t0) * 1e9 + 1e-30));
  return err < 1e-9 ? 0 : 1;
}
