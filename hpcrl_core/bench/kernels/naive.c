/*
 * naive.c -- textbook DGEMM reference (rung 1 of the kernel ladder).
 *
 * Computes C = A * B for row-major n x n matrices with the classic
 * i-j-k triple loop and a scalar accumulator (k innermost).
 *
 * Techniques: none (baseline).
 *
 * The inner loop walks B down a column (stride n doubles), so every
 * iteration touches a new cache line once n is large: this kernel is
 * memory-latency bound and serves as the "before" point of the ladder.
 *
 * Measured on the 2-core dev VM (Xeon, AVX-512), gcc 12 -O3 -march=native:
 *   1 thread : n=512 0.75 GFLOPS, n=1024 0.40 GFLOPS
 *   2 threads: n=512 0.66 GFLOPS, n=1024 0.38 GFLOPS (not threaded)
 *   (medians of 2-3 runs; this shared VM drifts by up to 2x)
 */

#include <stddef.h>

void dgemm(int n, const double *A, const double *B, double *C)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            double sum = 0.0;
            for (int k = 0; k < n; k++)
                sum += A[(size_t)i * n + k] * B[(size_t)k * n + j];
            C[(size_t)i * n + j] = sum;
        }
    }
}
