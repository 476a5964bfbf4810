/*
 * ikj.c -- loop-reordered DGEMM (rung 2 of the kernel ladder).
 *
 * Computes C = A * B for row-major n x n matrices using the i-k-j loop
 * order: each row of C is zeroed, then accumulated as a sum of scaled
 * rows of B (C[i,:] += A[i,k] * B[k,:]).
 *
 * Techniques: loop_reorder.
 *
 * With j innermost, B and C are both traversed with unit stride, so
 * every cache line fetched is fully used and the compiler can
 * auto-vectorise the inner loop at -O3.  There is no blocking, so for
 * large n each row of B is re-streamed from L2/L3 for every row of C.
 *
 * Measured on the 2-core dev VM (Xeon, AVX-512), gcc 12 -O3 -march=native:
 *   1 thread : n=512 7.6 GFLOPS, n=1024 5.5 GFLOPS
 *   2 threads: n=512 9.1 GFLOPS, n=1024 5.8 GFLOPS (not threaded)
 *   (medians of 5-10 interleaved runs; this shared VM drifts by up to 2x)
 */

#include <string.h>

void dgemm(int n, const double *A, const double *B, double *C)
{
    for (int i = 0; i < n; i++) {
        double *c = C + (size_t)i * n;
        memset(c, 0, (size_t)n * sizeof(double));
        for (int k = 0; k < n; k++) {
            const double a_ik = A[(size_t)i * n + k];
            const double *b = B + (size_t)k * n;
            for (int j = 0; j < n; j++)
                c[j] += a_ik * b[j];
        }
    }
}
