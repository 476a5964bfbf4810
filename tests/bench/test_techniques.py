"""Tests of the DGEMM technique detector.

Run: python3 -m pytest tests/bench/test_techniques.py -q

The kernels below are written the way models write them; most are shown as they look after ``gcc -E -P`` (macros
expanded, e.g. ``ii += 64``), a few as raw source with ``#define`` constants and macros.
"""

from __future__ import annotations

import random

import pytest

from hpcrl_core.bench.ctokens import Token, tokenize
from hpcrl_core.bench.techniques import (
    ALL_TECHNIQUES,
    Technique,
    constants_from_defines,
    detect_techniques,
    detect_techniques_in_source,
    explain_techniques,
    find_loops,
    parse_techniques,
)

LR = Technique.LOOP_REORDER
CB = Technique.CACHE_BLOCKING
RB = Technique.REGISTER_BLOCKING
OMP = Technique.OPENMP
SIMD = Technique.SIMD

KERNELS: dict[str, tuple[str, set[Technique]]] = {
    "naive_ijk": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0.0;
            for (int k = 0; k < n; k++)
                sum += A[i * n + k] * B[k * n + j];
            C[i * n + j] = sum;
        }
}
""",
        set(),
    ),
    "naive_ijk_c_accum": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    int i, j, k;
    for (i = 0; i < n; ++i)
        for (j = 0; j < n; ++j) {
            C[i*n + j] = 0;
            for (k = 0; k < n; ++k)
                C[i*n + j] += A[i*n + k] * B[k*n + j];
        }
}
""",
        set(),
    ),
    "ijk_c_equals_c_plus": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                C[i*n+j] = C[i*n+j] + A[i*n+k] * B[k*n+j];
}
""",
        set(),
    ),
    "ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n * n; i++) C[i] = 0.0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            const double a = A[i * n + k];
            for (int j = 0; j < n; j++)
                C[i * n + j] += a * B[k * n + j];
        }
}
""",
        {LR},
    ),
    "jki": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    memset(C, 0, sizeof(double) * n * n);
    for (int j = 0; j < n; j++)
        for (int k = 0; k < n; k++) {
            double b = B[k*n + j];
            for (int i = 0; i < n; i++)
                C[i*n + j] += A[i*n + k] * b;
        }
}
""",
        {LR},
    ),
    "c_equals_c_plus": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int k = 0; k < n; k++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                C[i*n+j] = C[i*n+j] + A[i*n+k] * B[k*n+j];
}
""",
        {LR},
    ),
    "ikj_pointers": (
        """
void dgemm(int n, const double *restrict A, const double *restrict B, double *restrict C) {
    for (int i = 0; i < n; i++) {
        double *restrict c = C + (size_t)i * n;
        for (int j = 0; j < n; j++) c[j] = 0.0;
        for (int k = 0; k < n; k++) {
            const double a = A[(size_t)i * n + k];
            const double *restrict b = B + (size_t)k * n;
            for (int j = 0; j < n; j++)
                c[j] += a * b[j];
        }
    }
}
""",
        {LR},
    ),
    "ptr_incr_ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < n; k++) {
            double a = A[i*n+k];
            double *cp = C + i*n;
            const double *bp = B + k*n;
            for (int j = 0; j < n; j++) *cp++ += a * *bp++;
        }
    }
}
""",
        {LR},
    ),
    "deref_ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                *(C + i*n + j) += *(A + i*n + k) * *(B + k*n + j);
}
""",
        {LR},
    ),
    "naive_omp": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i*n+k] * B[k*n+j];
            C[i*n+j] = s;
        }
}
""",
        {OMP},
    ),
    "transpose_omp_collapse": (
        """
#include <stdlib.h>
void dgemm(int n, const double *A, const double *B, double *C) {
    double *BT = malloc(sizeof(double) * n * n);
    #pragma omp parallel for
    for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) BT[j*n+i] = B[i*n+j];
    #pragma omp parallel for collapse(2)
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i*n+k] * BT[j*n+k];
            C[i*n+j] = s;
        }
    free(BT);
}
""",
        {OMP},
    ),
    "omp_parallel_for_nested": (
        """
#include <omp.h>
void dgemm(int n, const double *A, const double *B, double *C) {
    omp_set_num_threads(8);
    #pragma omp parallel
    {
        #pragma omp for nowait
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int k = 0; k < n; k++) s += A[i*n+k]*B[k*n+j];
                C[i*n+j] = s;
            }
    }
}
""",
        {OMP},
    ),
    "pragma_operator_raw": (
        """
#define PAR _Pragma("omp parallel for")
void dgemm(int n, const double *A, const double *B, double *C) {
    _Pragma("omp parallel for")
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i*n+k]*B[k*n+j];
            C[i*n+j] = s;
        }
}
""",
        {OMP},
    ),
    "ikj_omp_simd": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) C[i*n + j] = 0.0;
        for (int k = 0; k < n; k++) {
            double a = A[i*n + k];
#pragma omp simd
            for (int j = 0; j < n; j++)
                C[i*n + j] += a * B[k*n + j];
        }
    }
}
""",
        {LR, SIMD},
    ),
    "omp_simd_only": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
#pragma omp simd reduction(+:s)
            for (int k = 0; k < n; k++) s += A[i*n + k] * B[k*n + j];
            C[i*n + j] = s;
        }
}
""",
        {SIMD},
    ),
    "declare_simd": (
        """
#pragma omp declare simd
static double mul(double a, double b) { return a * b; }
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) { double s = 0;
#pragma GCC ivdep
        for (int k = 0; k < n; k++) s += mul(A[i*n+k], B[k*n+j]); C[i*n+j] = s; }
}
""",
        {SIMD},
    ),
    "blocked_ikj_pp": (
        """
static inline int min_int(int a, int b) { return a < b ? a : b; }
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n * n; i++) C[i] = 0.0;
    for (int ii = 0; ii < n; ii += 64)
        for (int kk = 0; kk < n; kk += 64)
            for (int jj = 0; jj < n; jj += 64)
                for (int i = ii; i < ii + 64 && i < n; i++)
                    for (int k = kk; k < min_int(kk + 64, n); k++) {
                        double a = A[i*n + k];
                        for (int j = jj; j < min_int(jj + 64, n); j++)
                            C[i*n + j] += a * B[k*n + j];
                    }
}
""",
        {LR, CB},
    ),
    "blocked_symbolic": (
        """
#define MIN(a, b) ((a) < (b) ? (a) : (b))
void dgemm(int n, const double *A, const double *B, double *C) {
    int bs = n < 128 ? 32 : 64;
    for (int i = 0; i < n * n; i++) C[i] = 0.0;
    for (int ii = 0; ii < n; ii += bs) {
        int iend = MIN(ii + bs, n);
        for (int kk = 0; kk < n; kk += bs) {
            int kend = MIN(kk + bs, n);
            for (int jj = 0; jj < n; jj += bs) {
                int jend = MIN(jj + bs, n);
                for (int i = ii; i < iend; i++)
                    for (int k = kk; k < kend; k++)
                        for (int j = jj; j < jend; j++)
                            C[i*n + j] += A[i*n + k] * B[k*n + j];
            }
        }
    }
}
""",
        {LR, CB},
    ),
    "raw_defines_block": (
        """
#include <stdlib.h>
#define BLOCK 32
#define UNROLL 4
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i += BLOCK)  /* not really blocked: inner loops don't use i */
        for (int j = 0; j < n; j++)
            C[j] = 0;
    for (int ii = 0; ii < n; ii += BLOCK)
        for (int jj = 0; jj < n; jj += BLOCK)
            for (int i = ii; i < ii + BLOCK && i < n; i++)
                for (int j = jj; j < jj + BLOCK && j < n; j++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += A[i*n+k]*B[k*n+j];
                    C[i*n+j] = s;
                }
}
""",
        {CB},
    ),
    "blocked_ijk_const_tiles": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n * n; i++) C[i] = 0.0;
    for (int ii = 0; ii < n; ii += 32)
        for (int jj = 0; jj < n; jj += 32)
            for (int kk = 0; kk < n; kk += 32)
                for (int i = 0; i < 32; i++)
                    for (int j = 0; j < 32; j++) {
                        double s = C[(ii + i)*n + jj + j];
                        for (int k = 0; k < 32; k++)
                            s += A[(ii + i)*n + kk + k] * B[(kk + k)*n + jj + j];
                        C[(ii + i)*n + jj + j] = s;
                    }
}
""",
        {CB},
    ),
    "blocked_ijk_partial_sums": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    const int bs = 48;
    for (int i = 0; i < n*n; i++) C[i] = 0;
    for (int kk = 0; kk < n; kk += bs)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                int kmax = kk + bs < n ? kk + bs : n;
                for (int k = kk; k < kmax; k++) s += A[i*n+k]*B[k*n+j];
                C[i*n+j] += s;
            }
}
""",
        {CB},
    ),
    "block_index_loops": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    int nb = n / 64;
    for (int bi = 0; bi < nb; bi++)
        for (int bk = 0; bk < nb; bk++)
            for (int bj = 0; bj < nb; bj++)
                for (int i = bi * 64; i < (bi + 1) * 64; i++)
                    for (int k = bk * 64; k < bk * 64 + 64; k++)
                        for (int j = bj * 64; j < (bj + 1) * 64; j++)
                            C[i*n + j] += A[i*n + k] * B[k*n + j];
}
""",
        {LR, CB},
    ),
    "helper_block": (
        """
static void block(int n, const double *A, const double *B, double *C, int i0, int j0, int k0) {
    for (int i = i0; i < i0 + 64 && i < n; i++)
        for (int j = j0; j < j0 + 64 && j < n; j++) {
            double s = C[i*n+j];
            for (int k = k0; k < k0 + 64 && k < n; k++) s += A[i*n+k] * B[k*n+j];
            C[i*n+j] = s;
        }
}
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n*n; i++) C[i] = 0;
    for (int ii = 0; ii < n; ii += 64)
        for (int jj = 0; jj < n; jj += 64)
            for (int kk = 0; kk < n; kk += 64)
                block(n, A, B, C, ii, jj, kk);
}
""",
        {CB},
    ),
    "regblock_2x2": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i += 2)
        for (int j = 0; j < n; j += 2) {
            double c00 = 0, c01 = 0, c10 = 0, c11 = 0;
            for (int k = 0; k < n; k++) {
                double a0 = A[i*n + k], a1 = A[(i + 1)*n + k];
                double b0 = B[k*n + j], b1 = B[k*n + j + 1];
                c00 += a0 * b0; c01 += a0 * b1;
                c10 += a1 * b0; c11 += a1 * b1;
            }
            C[i*n + j] = c00; C[i*n + j + 1] = c01;
            C[(i + 1)*n + j] = c10; C[(i + 1)*n + j + 1] = c11;
        }
}
""",
        {RB},
    ),
    "two_rows_pointers": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i += 2)
        for (int j = 0; j < n; j++) {
            const double *a0 = A + i*n, *a1 = a0 + n;
            double c0 = 0, c1 = 0;
            for (int k = 0; k < n; k++) { double b = B[k*n + j]; c0 += a0[k] * b; c1 += a1[k] * b; }
            C[i*n + j] = c0; C[i*n + n + j] = c1;
        }
}
""",
        {RB},
    ),
    "regblock_acc_array_ijk": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i += 4)
        for (int j = 0; j < n; j++) {
            double acc[4] = {0, 0, 0, 0};
            for (int k = 0; k < n; k++) {
                double b = B[k*n + j];
                for (int r = 0; r < 4; r++) acc[r] += A[(i + r)*n + k] * b;
            }
            for (int r = 0; r < 4; r++) C[(i + r)*n + j] = acc[r];
        }
}
""",
        {LR, RB},
    ),
    "unroll_k4": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            int k = 0;
            for (; k + 3 < n; k += 4) {
                s += A[i*n + k] * B[k*n + j];
                s += A[i*n + k + 1] * B[(k + 1)*n + j];
                s += A[i*n + k + 2] * B[(k + 2)*n + j];
                s += A[i*n + k + 3] * B[(k + 3)*n + j];
            }
            for (; k < n; k++) s += A[i*n + k] * B[k*n + j];
            C[i*n + j] = s;
        }
}
""",
        {RB},
    ),
    "raw_unroll_define": (
        """
#define UNROLL 4
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s0 = 0, s1 = 0;
            int k;
            for (k = 0; k + UNROLL <= n; k += UNROLL) {
                s0 += A[i*n+k] * B[k*n+j] + A[i*n+k+2] * B[(k+2)*n+j];
                s1 += A[i*n+k+1] * B[(k+1)*n+j] + A[i*n+k+3] * B[(k+3)*n+j];
            }
            for (; k < n; k++) s0 += A[i*n+k] * B[k*n+j];
            C[i*n+j] = s0 + s1;
        }
}
""",
        {RB},
    ),
    "gcc_unroll": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
#pragma GCC unroll 4
            for (int k = 0; k < n; k++) s += A[i*n + k] * B[k*n + j];
            C[i*n + j] = s;
        }
}
""",
        {RB},
    ),
    "unroll_pragma_variants": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
#pragma GCC unroll 1
#pragma unroll 1
#pragma GCC ivdep
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i*n+k]*B[k*n+j];
            C[i*n+j] = s;
        }
}
""",
        set(),
    ),
    "avx_micro": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j += 8) {
            __m256d c0 = _mm256_setzero_pd();
            __m256d c1 = _mm256_setzero_pd();
            for (int k = 0; k < n; k++) {
                __m256d a = _mm256_broadcast_sd(&A[i*n + k]);
                c0 = _mm256_fmadd_pd(a, _mm256_loadu_pd(&B[k*n + j]), c0);
                c1 = _mm256_fmadd_pd(a, _mm256_loadu_pd(&B[k*n + j + 4]), c1);
            }
            _mm256_storeu_pd(&C[i*n + j], c0);
            _mm256_storeu_pd(&C[i*n + j + 4], c1);
        }
}
""",
        {RB, SIMD},
    ),
    "avx_ijk_1x4": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j += 4) {
            __m256d c = _mm256_setzero_pd();
            for (int k = 0; k < n; k++)
                c = _mm256_fmadd_pd(_mm256_set1_pd(A[i*n + k]), _mm256_loadu_pd(&B[k*n + j]), c);
            _mm256_storeu_pd(&C[i*n + j], c);
        }
}
""",
        {SIMD},
    ),
    "avx_ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            __m256d a = _mm256_set1_pd(A[i*n + k]);
            for (int j = 0; j < n; j += 4) {
                __m256d c = _mm256_loadu_pd(&C[i*n + j]);
                c = _mm256_fmadd_pd(a, _mm256_loadu_pd(&B[k*n + j]), c);
                _mm256_storeu_pd(&C[i*n + j], c);
            }
        }
}
""",
        {LR, SIMD},
    ),
    "avx_ikj_ptr_loads": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            __m256d a = _mm256_broadcast_sd(A + i*n + k);
            for (int j = 0; j < n; j += 4)
                _mm256_storeu_pd(C + i*n + j, _mm256_add_pd(_mm256_loadu_pd(C + i*n + j),
                                                            _mm256_mul_pd(a, _mm256_loadu_pd(B + k*n + j))));
        }
}
""",
        {LR, SIMD},
    ),
    "vecext": (
        """
typedef double v4d __attribute__((vector_size(32)));
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            double a = A[i*n + k];
            for (int j = 0; j < n; j += 4) {
                v4d b, c;
                __builtin_memcpy(&b, &B[k*n + j], sizeof b);
                __builtin_memcpy(&c, &C[i*n + j], sizeof c);
                c += a * b;
                __builtin_memcpy(&C[i*n + j], &c, sizeof c);
            }
        }
}
""",
        {LR, SIMD},
    ),
    "avx_4x8_tiled_omp": (
        """
#include <immintrin.h>
#define MIN(a,b) ((a)<(b)?(a):(b))
static inline void kernel_4x8(int n, int kb, const double *A, const double *B, double *C) {
    __m256d c00 = _mm256_loadu_pd(&C[0*n]), c01 = _mm256_loadu_pd(&C[0*n+4]);
    __m256d c10 = _mm256_loadu_pd(&C[1*n]), c11 = _mm256_loadu_pd(&C[1*n+4]);
    __m256d c20 = _mm256_loadu_pd(&C[2*n]), c21 = _mm256_loadu_pd(&C[2*n+4]);
    __m256d c30 = _mm256_loadu_pd(&C[3*n]), c31 = _mm256_loadu_pd(&C[3*n+4]);
    for (int k = 0; k < kb; k++) {
        __m256d b0 = _mm256_loadu_pd(&B[k*n]), b1 = _mm256_loadu_pd(&B[k*n+4]);
        __m256d a;
        a = _mm256_broadcast_sd(&A[0*n+k]); c00 = _mm256_fmadd_pd(a, b0, c00); c01 = _mm256_fmadd_pd(a, b1, c01);
        a = _mm256_broadcast_sd(&A[1*n+k]); c10 = _mm256_fmadd_pd(a, b0, c10); c11 = _mm256_fmadd_pd(a, b1, c11);
        a = _mm256_broadcast_sd(&A[2*n+k]); c20 = _mm256_fmadd_pd(a, b0, c20); c21 = _mm256_fmadd_pd(a, b1, c21);
        a = _mm256_broadcast_sd(&A[3*n+k]); c30 = _mm256_fmadd_pd(a, b0, c30); c31 = _mm256_fmadd_pd(a, b1, c31);
    }
    _mm256_storeu_pd(&C[0*n], c00); _mm256_storeu_pd(&C[0*n+4], c01);
    _mm256_storeu_pd(&C[1*n], c10); _mm256_storeu_pd(&C[1*n+4], c11);
    _mm256_storeu_pd(&C[2*n], c20); _mm256_storeu_pd(&C[2*n+4], c21);
    _mm256_storeu_pd(&C[3*n], c30); _mm256_storeu_pd(&C[3*n+4], c31);
}
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n*n; i++) C[i] = 0.0;
    #pragma omp parallel for schedule(dynamic)
    for (int ii = 0; ii < n; ii += 128)
        for (int kk = 0; kk < n; kk += 256)
            for (int jj = 0; jj < n; jj += 256) {
                int iend = MIN(ii + 128, n), kend = MIN(kk + 256, n), jend = MIN(jj + 256, n);
                for (int i = ii; i + 3 < iend; i += 4)
                    for (int j = jj; j + 7 < jend; j += 8)
                        kernel_4x8(n, kend - kk, &A[i*n+kk], &B[kk*n+j], &C[i*n+j]);
            }
}
""",
        {CB, RB, OMP, SIMD},
    ),
    "blis": (
        """
typedef double v4d __attribute__((vector_size(32)));
static double Ap[96 * 256] __attribute__((aligned(64)));
static double Bp[256 * 4096] __attribute__((aligned(64)));
static inline int imin(int a, int b) { return a < b ? a : b; }
static void pack_a(int mc, int kc, const double *A, int lda, double *Ap) {
    for (int ir = 0; ir < mc; ir += 6)
        for (int p = 0; p < kc; p++)
            for (int r = 0; r < 6; r++)
                *Ap++ = (ir + r < mc) ? A[(ir + r) * lda + p] : 0.0;
}
static void pack_b(int kc, int nc, const double *B, int ldb, double *Bp) {
    for (int jr = 0; jr < nc; jr += 8)
        for (int p = 0; p < kc; p++)
            for (int c = 0; c < 8; c++)
                *Bp++ = (jr + c < nc) ? B[p * ldb + jr + c] : 0.0;
}
static inline void micro_kernel(int kc, const double *a, const double *b, double *C, int ldc, int mr, int nr) {
    v4d acc[6][2] = {{0}};
    for (int p = 0; p < kc; p++) {
        v4d b0 = *(const v4d *)(b + 8 * p);
        v4d b1 = *(const v4d *)(b + 8 * p + 4);
        for (int r = 0; r < 6; r++) {
            v4d av = {a[6 * p + r], a[6 * p + r], a[6 * p + r], a[6 * p + r]};
            acc[r][0] += av * b0;
            acc[r][1] += av * b1;
        }
    }
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++)
            C[r * ldc + c] += acc[r][c / 4][c % 4];
}
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n * n; i++) C[i] = 0.0;
    for (int jc = 0; jc < n; jc += 4096) {
        int nc = imin(4096, n - jc);
        for (int pc = 0; pc < n; pc += 256) {
            int kc = imin(256, n - pc);
            pack_b(kc, nc, &B[pc * n + jc], n, Bp);
            #pragma omp parallel for
            for (int ic = 0; ic < n; ic += 96) {
                int mc = imin(96, n - ic);
                double Apl[96 * 256];
                pack_a(mc, kc, &A[ic * n + pc], n, Apl);
                for (int jr = 0; jr < nc; jr += 8)
                    for (int ir = 0; ir < mc; ir += 6)
                        micro_kernel(kc, &Apl[ir * kc], &Bp[jr * kc], &C[(ic + ir) * n + jc + jr], n,
                                     imin(6, mc - ir), imin(8, nc - jr));
            }
        }
    }
}
""",
        {LR, CB, RB, OMP, SIMD},
    ),
    "rank1_helper_unrolled_by_pointer_strides": (
        """
typedef double v4d __attribute__((vector_size(32)));
static inline void rank1(v4d acc[4][2], const double *restrict a, const double *restrict b) {
    v4d bv[2];
    for (int v = 0; v < 2; v++) bv[v] = *(const v4d *)(b + 4 * v);
    for (int i = 0; i < 4; i++)
        for (int v = 0; v < 2; v++)
            acc[i][v] += a[i] * bv[v];
}
static void micro(int kc, const double *a, const double *b, double *c, int ldc) {
    v4d acc[4][2];
    for (int i = 0; i < 4; i++) for (int v = 0; v < 2; v++) acc[i][v] = (v4d){0};
    int k = 0;
    for (; k + 1 < kc; k += 2) {
        rank1(acc, a, b);
        rank1(acc, a + 4, b + 8);
        a += 8;
        b += 16;
    }
    for (int i = 0; i < 4; i++) for (int v = 0; v < 2; v++) *(v4d *)(c + i * ldc + 4 * v) = acc[i][v];
}
void dgemm(int n, const double *A, const double *B, double *C) {
    (void)micro; (void)A; (void)B; (void)C; (void)n;
}
""",
        {LR, RB, SIMD},
    ),
    "four_row_pointers_ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n * n; i++) C[i] = 0;
    for (int i = 0; i < n; i += 4) {
        double *c0 = C + i*n, *c1 = c0 + n, *c2 = c1 + n, *c3 = c2 + n;
        for (int k = 0; k < n; k++) {
            double a0 = A[i*n+k], a1 = A[(i+1)*n+k], a2 = A[(i+2)*n+k], a3 = A[(i+3)*n+k];
            const double *b = B + k*n;
            for (int j = 0; j < n; j++) {
                c0[j] += a0 * b[j]; c1[j] += a1 * b[j]; c2[j] += a2 * b[j]; c3[j] += a3 * b[j];
            }
        }
    }
}
""",
        {LR, RB},
    ),
    "j_unrolled_ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            double a = A[i*n+k];
            int j = 0;
            for (; j + 3 < n; j += 4) {
                C[i*n+j] += a*B[k*n+j];     C[i*n+j+1] += a*B[k*n+j+1];
                C[i*n+j+2] += a*B[k*n+j+2]; C[i*n+j+3] += a*B[k*n+j+3];
            }
            for (; j < n; j++) C[i*n+j] += a*B[k*n+j];
        }
}
""",
        {LR, RB},
    ),
    "k_blocked_ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n*n; i++) C[i] = 0;
    for (int kk = 0; kk < n; kk += 256)
        for (int i = 0; i < n; i++)
            for (int k = kk; k < kk + 256 && k < n; k++) {
                double a = A[i*n+k];
                for (int j = 0; j < n; j++) C[i*n+j] += a * B[k*n+j];
            }
}
""",
        {LR, CB},
    ),
    "index_macro_ijk": (
        """
#define IDX(i, j) ((i) * n + (j))
void dgemm(int n, const double *A, const double *B, double *C) {
    for (register int i = 0; i < n; i++)
        for (register int j = 0; j < n; j++) {
            C[IDX(i, j)] = 0.0;
            for (register int k = 0; k < n; k++) C[IDX(i, j)] += A[IDX(i, k)] * B[IDX(k, j)];
        }
}
""",
        set(),
    ),
    "jik": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i*n+k] * B[k*n+j];
            C[i*n+j] = s;
        }
}
""",
        set(),
    ),
    "vla_ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    double (*c)[n] = (double (*)[n])C;
    const double (*a)[n] = (const double (*)[n])A, (*b)[n] = (const double (*)[n])B;
    for (int i = 0; i < n; i++) for (int k = 0; k < n; k++) for (int j = 0; j < n; j++) c[i][j] += a[i][k] * b[k][j];
}
""",
        {LR},
    ),
    "helper_axpy": (
        """
static void axpy(int n, double a, const double *x, double *y) {
    for (int j = 0; j < n; j++) y[j] += a * x[j];
}
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            axpy(n, A[i*n+k], &B[k*n], &C[i*n]);
}
""",
        {LR},
    ),
    "while_loops": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    int i = 0;
    while (i < n) {
        int j = 0;
        while (j < n) {
            double s = 0;
            int k = 0;
            do { s += A[i*n + k] * B[k*n + j]; k++; } while (k < n);
            C[i*n + j] = s;
            j++;
        }
        i++;
    }
}
""",
        set(),
    ),
    "while_ikj": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    int i = 0;
    while (i < n) {
        int k = 0;
        while (k < n) {
            double a = A[i*n + k];
            int j = 0;
            while (j < n) { C[i*n + j] += a * B[k*n + j]; j++; }
            k++;
        }
        i++;
    }
}
""",
        {LR},
    ),
    "kr_style": (
        """
void dgemm(n, A, B, C) int n; const double *A, *B; double *C; {
    int i, j, k;
    for (i = 0; i < n; i++) for (k = 0; k < n; k++) for (j = 0; j < n; j++) C[i*n+j] += A[i*n+k]*B[k*n+j];
}
""",
        {LR},
    ),
    "labels_switch": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    int i = 0;
again:
    switch (n & 1) { case 0: break; default: break; }
    for (i = 0; i < n; i++) for (int k = 0; k < n; k++) {
        double a = A[i*n+k];
        for (int j = 0; j < n; j++) { if (a != 0) C[i*n+j] += a*B[k*n+j]; }
    }
}
""",
        {LR},
    ),
    "malloc_only": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    double *t = _mm_malloc(8 * n, 64);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i*n+k]*B[k*n+j];
            C[i*n+j] = s;
        }
    _mm_free(t);
}
""",
        set(),
    ),
    "writeback_from_temp": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    double T[64 * 64];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i*n+k]*B[k*n+j];
            T[(i%64)*64 + j%64] = s;
        }
    for (int i = 0; i < 64 && i < n; i++)
        for (int j = 0; j < 64 && j < n; j++)
            C[i*n + j] += T[i*64 + j];
    for (int j = 0; j < n; j++) C[j] = C[j] + *(A + j*n);
}
""",
        set(),
    ),
    "row_flat_index": (
        """
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++)
        for (int p = i * n; p < (i + 1) * n; p++) C[p] = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i*n+k]*B[k*n+j];
            C[i*n+j] = s;
        }
}
""",
        set(),
    ),
    "no_loops": (
        """int x; double f(double a) { return a * 2; }
""",
        set(),
    ),
    "empty": (
        """
""",
        set(),
    ),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_realistic_kernels(name: str) -> None:
    src, expected = KERNELS[name]
    assert detect_techniques_in_source(src) == frozenset(expected), explain_techniques(tokenize(src))


def test_the_table_covers_every_technique_and_the_empty_set() -> None:
    seen = [frozenset(expected) for _, expected in KERNELS.values()]
    assert frozenset() in seen
    assert frozenset(ALL_TECHNIQUES) in seen
    for tech in ALL_TECHNIQUES:
        assert sum(tech in s for s in seen) >= 3, tech


BLOCKED_PREPROCESSED = """
void dgemm(int n, const double *A, const double *B, double *C) {
    int bs = n < 128 ? 32 : 64;
    for (int i = 0; i < n * n; i++) C[i] = 0.0;
    for (int ii = 0; ii < n; ii += bs)
        for (int kk = 0; kk < n; kk += bs)
            for (int jj = 0; jj < n; jj += bs)
                for (int i = ii; i < ((ii + bs) < (n) ? (ii + bs) : (n)); i++)
                    for (int k = kk; k < ((kk + bs) < (n) ? (kk + bs) : (n)); k++)
                        for (int j = jj; j < ((jj + bs) < (n) ? (jj + bs) : (n)); j++)
                            C[i*n + j] += A[i*n + k] * B[k*n + j];
}
"""


def test_symbolic_blocking_with_expanded_min_macro() -> None:
    assert detect_techniques(tokenize(BLOCKED_PREPROCESSED)) == {CB, LR}


RAW_BLOCKED = """
#define BS 16
#define STEP (2 * BS)
void dgemm(int n, const double *A, const double *B, double *C) {
    for (int jj = 0; jj < n; jj += STEP)
        for (int i = 0; i < n; i++)
            for (int j = jj; j < jj + STEP && j < n; j++) {
                double s = 0;
                for (int k = 0; k < n; k++) s += A[i*n + k] * B[k*n + j];
                C[i*n + j] = s;
            }
}
"""


def test_raw_source_defines_are_resolved() -> None:
    assert constants_from_defines(RAW_BLOCKED) == {"BS": 16, "STEP": 32}
    (outer,) = find_loops(tokenize(RAW_BLOCKED), constants_from_defines(RAW_BLOCKED))
    assert (outer.var, outer.step) == ("jj", 32)
    assert detect_techniques_in_source(RAW_BLOCKED) == {CB}
    preprocessed = RAW_BLOCKED.replace("STEP", "(2 * 16)").split("\n", 3)[3]
    assert detect_techniques(tokenize(preprocessed)) == {CB}


def test_small_step_without_inner_bounds_is_register_not_cache_blocking() -> None:
    src, expected = KERNELS["regblock_2x2"]
    found = explain_techniques(tokenize(src))
    assert CB not in found and set(found) == expected
    assert any("line 3" in why and "constant offsets" in why for why in found[RB])


def test_micro_kernel_in_a_helper_counts_inside_its_caller() -> None:
    found = explain_techniques(tokenize(KERNELS["blis"][0]))
    assert any("micro_kernel" in why and "6 iterations" in why for why in found[RB])
    assert any("jc (step 4096)" in why and "three-deep" in why for why in found[CB])
    (jc_loop,) = [loop for loop in find_loops(tokenize(KERNELS["blis"][0])) if loop.var == "jc"]
    nested = {(loop.function, loop.var) for loop in jc_loop.descendants()}
    assert {("dgemm", "pc"), ("dgemm", "ic"), ("pack_a", "p"), ("micro_kernel", "r")} <= nested


@pytest.mark.parametrize(
    ("header", "var", "step", "trips"),
    [
        ("for (int i = 0; i < n; i++)", "i", 1, None),
        ("for (i = 0; i < n; ++i)", "i", 1, None),
        ("for (size_t i = 0; i < (size_t)n; i += 1)", "i", 1, None),
        ("for (int i = 0; i < n; i = i + 1)", "i", 1, None),
        ("for (int i = n - 1; i >= 0; i--)", "i", 1, None),
        ("for (int i = 0; i < n; i += 8)", "i", 8, None),
        ("for (int i = 0; i < n; i = 4 + i)", "i", 4, None),
        ("for (int ii = 0; ii < n; ii += 2 * 32)", "ii", 64, None),
        ("for (int ii = 0; ii < n; ii += bs)", "ii", "symbolic", None),
        ("for (int i = 1; i < n; i *= 2)", "i", "symbolic", None),
        ("for (int r = 0; r < 4; r++)", "r", 1, 4),
        ("for (int r = 0; r <= 5; ++r)", "r", 1, 6),
        ("for (int r = 3; r >= 0; r--)", "r", 1, 4),
        ("for (int c = 0; c < 16; c += 4)", "c", 4, 4),
        ("for (int c = 0; 8 > c; c++)", "c", 1, 8),
        ("for (int i = 0, p = 0; i < n; i++, p += n)", "i", 1, None),
        ("for (int k = 0; k < n; )", "k", None, None),
        ("for (;;)", None, None, None),
    ],
)
def test_loop_records(header: str, var: str | None, step: int | str | None, trips: int | None) -> None:
    (loop,) = find_loops(tokenize(f"void f(int n, int bs, double *x) {{ {header} x[0] += 1.0; }}"))
    assert (loop.kind, loop.var, loop.step, loop.trip_count) == ("for", var, step, trips)
    assert loop.small_const_bounds == (trips is not None and 2 <= trips <= 32)
    assert loop.function == "f" and loop.line == 1


def test_known_constants_resolve_steps_and_bounds() -> None:
    src = """
enum { MR = 6, NR };
static const int KC = 256;
void f(int n, double *x) {
    int bs = 64;
    for (int ii = 0; ii < n; ii += bs)
        for (int p = 0; p < n; p += KC)
            for (int r = 0; r < MR; r++)
                for (int c = 0; c < NR; c++) x[r] += 1.0;
}
"""
    (ii,) = find_loops(tokenize(src))
    (p,) = ii.children
    (r,) = p.children
    (c,) = r.children
    assert (ii.step, p.step, r.trip_count, c.trip_count) == (64, 256, 6, 7)
    assert c.parent is r and r.parent is p and p.parent is ii and ii.parent is None


def test_while_loops_become_loop_records() -> None:
    src = "void f(int n, double *x) { int k = 0; while (k < n) { x[k] += 1.0; k += 4; } do { } while (0); }"
    (loop,) = find_loops(tokenize(src))
    assert (loop.kind, loop.var, loop.step, [t.text for t in loop.incr]) == ("while", "k", 4, ["k", "+=", "4"])
    assert [t.text for t in loop.init] == ["int", "k", "=", "0"]


@pytest.mark.parametrize(
    ("pragma", "expected"),
    [
        ("omp parallel for", {OMP}),
        ("omp parallel for schedule(static) num_threads(8)", {OMP}),
        ("omp for nowait", {OMP}),
        ("omp parallel", {OMP}),
        ("omp parallel for simd", {OMP, SIMD}),
        ("omp taskloop simd grainsize(4)", {OMP, SIMD}),
        ("omp teams distribute", {OMP}),
        ("omp single", {OMP}),
        ("omp simd", {SIMD}),
        ("omp simd reduction(+:s) aligned(a:32)", {SIMD}),
        ("omp declare simd", {SIMD}),
        ("omp simd private(single)", {SIMD}),
        ("omp critical", set()),
        ("omp tile sizes(64, 64)", {CB}),
        ("omp unroll partial(4)", {RB}),
        ("omp unroll partial(1)", set()),
        ("GCC unroll 4", {RB}),
        ("GCC unroll 1", set()),
        ("unroll", {RB}),
        ("unroll 8", {RB}),
        ("unroll(2)", {RB}),
        ("unroll 1", set()),
        ("nounroll", set()),
        ('GCC optimize("unroll-loops")', {RB}),
        ('GCC optimize("O3")', set()),
        ("GCC ivdep", set()),
        ('GCC target("avx2,fma")', set()),
        ("clang loop unroll_count(4)", {RB}),
        ("clang loop vectorize(enable) interleave(enable)", {SIMD}),
        ("clang loop vectorize(disable)", set()),
        ("STDC FP_CONTRACT ON", set()),
    ],
)
def test_pragmas(pragma: str, expected: set[Technique]) -> None:
    assert detect_techniques(tokenize(f"#pragma {pragma}\nvoid f(void) {{ }}\n")) == expected


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("__m256d c = _mm256_setzero_pd();", {SIMD}),
        ("__m512d c;", {SIMD}),
        ("__m128i m;", {SIMD}),
        ("x = _mm_add_pd(a, b);", {SIMD}),
        ("x = _mm512_fmadd_pd(a, b, c);", {SIMD}),
        ("x = __builtin_ia32_addpd(a, b);", {SIMD}),
        ("typedef double v4d __attribute__((__vector_size__(32)));", {SIMD}),
        ("typedef double v2d __attribute__((ext_vector_type(2)));", {SIMD}),
        ("float64x2_t v;", {SIMD}),
        ("double *p = _mm_malloc(64, 64); _mm_free(p); _mm_prefetch(p, 3); _mm_sfence();", set()),
        ("int vector = 4, m256d = 2, __m256dx = 1;", set()),
        ("omp_set_num_threads(4);", {OMP}),
        ("int omp_get_thread_num_x = 0;", set()),
        ('__attribute__((optimize("unroll-loops"))) int y;', {RB}),
    ],
)
def test_identifier_rules(snippet: str, expected: set[Technique]) -> None:
    assert detect_techniques(tokenize(f"void f(double a, double b, double c) {{ {snippet} }}")) == expected


def test_parse_techniques() -> None:
    assert parse_techniques(["simd", " OpenMP ", "cache_blocking"]) == {SIMD, OMP, CB}
    assert parse_techniques([]) == frozenset()
    assert parse_techniques(t.value for t in ALL_TECHNIQUES) == frozenset(ALL_TECHNIQUES)


def test_parse_techniques_names_the_unknown_and_lists_the_known() -> None:
    with pytest.raises(ValueError, match="unknown technique 'tiling'") as info:
        parse_techniques(["simd", "tiling"])
    for tech in ALL_TECHNIQUES:
        assert tech.value in str(info.value)


def test_all_techniques_order() -> None:
    assert [t.value for t in ALL_TECHNIQUES] == ["loop_reorder", "cache_blocking", "register_blocking", "openmp",
                                                 "simd"]


GARBAGE = [
    "void dgemm(int n, const double *A, {{ for (i = 0; i < n; i++ { x += ; } } }} ) ] ;\nfor while do if else ) ( {",
    "}}}} for (int i = 0; i < n; i += 64) { for (j = i; j < i + 64; j++) C[j] += A[j] * B[j];",
    "void f( { ( [ for ( ; ; ) while do ; else case : default",
    "int x = { 1, 2, { 3 }; void g(void) { return; } } } int h(",
    "void dgemm(int n) { for (int i = 0; i < n; i++) for (int k = 0; k < n; k++) for (int j = 0; j < n; j++) C[i*n+j]"
    " += A[i*n+k] * B[k*n+j]",
    "#pragma omp parallel for\n",
    "for",
    "do",
    "",
    "void dgemm(int n) " + "{" * 3000 + "for (i=0;i<n;i++) x += 1;" + ")" * 3000 + "(" * 3000,
    "void dgemm(int n, double *C) {" + "for (int i = 0; i < n; i += 2) " * 400 + "C[i] += C[i+1] * 2; }",
]


@pytest.mark.parametrize("src", GARBAGE)
def test_garbage_and_partial_code_give_a_set(src: str) -> None:
    found = detect_techniques_in_source(src)
    assert isinstance(found, frozenset) and found <= frozenset(ALL_TECHNIQUES)


def test_partial_code_still_detects_what_it_sees() -> None:
    assert detect_techniques_in_source(GARBAGE[1]) == {CB, LR}
    assert detect_techniques_in_source(GARBAGE[4]) == {LR}
    assert detect_techniques_in_source(GARBAGE[5]) == {OMP}


def test_mutated_kernels_never_raise() -> None:
    rng = random.Random(20240601)
    sources = [src for src, _ in KERNELS.values()]
    pool = [tok for src in sources for tok in tokenize(src)]
    pool += [Token("punct", p, 1) for p in ("(", ")", "{", "}", "[", "]", ";", ",", "=", "+=", "++", "*", "->")]
    pool += [Token("ident", w, 1) for w in ("for", "while", "do", "if", "else", "switch", "case", "return", "enum")]
    for _ in range(300):
        toks = tokenize(rng.choice(sources))
        for _ in range(rng.randint(1, 15)):
            if rng.random() < 0.5 and toks:
                del toks[rng.randrange(len(toks))]
            else:
                toks.insert(rng.randrange(len(toks) + 1), rng.choice(pool))
        if rng.random() < 0.3 and toks:
            a, b = sorted(rng.randrange(len(toks) + 1) for _ in range(2))
            toks = toks[a:b]
        assert detect_techniques(toks) <= frozenset(ALL_TECHNIQUES)


def test_unterminated_comment_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="line 2: unterminated comment"):
        detect_techniques_in_source("void dgemm(int n) {\n /* oops\n}")


def test_accumulator_array_passed_to_a_helper_and_strided_unrolling() -> None:
    found = explain_techniques(tokenize(KERNELS["rank1_helper_unrolled_by_pointer_strides"][0]))
    assert any("rank1" in why and "4 iterations" in why for why in found[RB])
    assert any("over k (step 2)" in why and "constant offsets" in why for why in found[RB])


BLOCK_INDEX_KERNEL = """{head}
void dgemm(int n, const double *A, const double *B, double *C) {{
    {local}
    int nb = (n + BS - 1) / BS;
    for (int b = 0; b < nb; b++) {{
        {bounds}
            for (int j = 0; j < n; j++) {{
                double s = 0.0;
                for (int k = 0; k < n; k++) s += A[i*n + k] * B[k*n + j];
                C[i*n + j] = s;
            }}
    }}
}}
"""
BLOCK_BOUNDS = {
    "via_block_start": "int i0 = b * BS;\n        for (int i = i0; i < i0 + BS && i < n; i++)",
    "in_the_header": "for (int i = b * BS; i < (b + 1) * BS && i < n; i++)",
}
BLOCK_CONSTANTS = {
    "local_const": ("", "const int BS = 24;"),
    "define": ("#define BS 24", ""),
    "enum": ("enum { BS = 24 };", ""),
    "file_scope_static_const": ("static const int BS = 24;", ""),
}


@pytest.mark.parametrize("bounds", list(BLOCK_BOUNDS))
@pytest.mark.parametrize("constant", list(BLOCK_CONSTANTS))
def test_block_index_loops_are_cache_blocking_whatever_declares_the_block_size(constant: str, bounds: str) -> None:
    head, local = BLOCK_CONSTANTS[constant]
    src = BLOCK_INDEX_KERNEL.format(head=head, local=local, bounds=BLOCK_BOUNDS[bounds])
    found = explain_techniques(tokenize(src), constants_from_defines(src))
    assert set(found) == {CB}, found
    assert any("over b (step 1)" in why and "scales the bounds" in why for why in found[CB])


def test_a_local_constant_used_after_a_multiplication_is_a_known_constant() -> None:
    src = """
void dgemm(int n, const double *A, const double *B, double *C) {
    const int BS = 64;
    for (int ii = 0; ii < n; ii += BS)
        for (int jb = 0; jb < n / BS; jb++)
            for (int i = ii; i < ii + BS && i < n; i++)
                for (int j = jb * BS; j < jb * BS + BS; j++)
                    C[i*n + j] += A[i*n + j] * B[j];
}
"""
    (ii,) = find_loops(tokenize(src))
    (jb,) = ii.children
    assert (ii.step, jb.step) == (64, 1)


@pytest.mark.parametrize(
    ("decl", "step"),
    [
        ("const int S = 8; x[0] = n * S;", 8),
        ("int S = 8; x[0] = x[1] * S + (n & S);", 8),
        ("int S = 8; x[0] = sizeof(double) * S;", 8),
        ("int *const S = 0;", "symbolic"),
        ("const int *S = 0;", "symbolic"),
        ("int * restrict S = 0;", "symbolic"),
        ("idx_t *S = 0;", "symbolic"),
        ("struct node *S = 0;", "symbolic"),
        ("long S = 0; x[0] = n * *S;", "symbolic"),
        ("long S = 0; x[0] = (double)*S;", "symbolic"),
        ("long S = 8; g(&S);", "symbolic"),
    ],
)
def test_names_after_binary_operators_are_constants_pointers_are_not(decl: str, step: int | str) -> None:
    src = f"void f(int n, double *x) {{ {decl} for (long i = 0; i < n; i += (long)S) x[i] += 1.0; }}"
    (loop,) = find_loops(tokenize(src))
    assert loop.step == step
