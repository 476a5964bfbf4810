/*
 * packed.c -- BLIS/GotoBLAS-style packed DGEMM (rung 5, the project's best
 * reference kernel): C = A * B for row-major n x n matrices.
 *
 * Techniques: loop_reorder, cache_blocking, register_blocking, openmp, simd.
 *
 * Structure (Goto's five loops around a micro-kernel):
 *   jc (NC cols of B) -> pc (KC deep) -> [pack B: KC x NC, as NR-wide panels]
 *     -> ic (MC rows of A, OpenMP-parallel) -> [pack A: MC x KC, MR-tall panels]
 *       -> jr (NR) -> ir (MR) -> micro-kernel (MR x NR tile of C, in registers)
 *
 * Micro-tile, by the node's vector width (-march=native):
 * - AVX-512: MR x NR = 6 x 32 = 6 rows x 4 vectors of 8 doubles: 24
 *   accumulator zmm registers + 4 for the B row + 1 broadcast of A = 29 of
 *   32, 10 loads per 24 FMAs.  On an AVX-512 VM 6x32 and 8x24 were within
 *   noise (6x32 slightly ahead); 12x16, 14x16, 8x16 were slower, and
 *   AVX2-width tiles (6x8, 4x24 of 4-double vectors) ~40% slower.
 * - AVX2 (no __AVX512F__): 6 x 8 = 6 rows x 2 vectors of 4 doubles: 12
 *   accumulator ymm registers + 2 for B + 1 broadcast = 15 of 16.  The
 *   AVX-512 tile there needs 48 ymm registers and spills: slower than the
 *   naive kernel at n = 64 on a Zen 3 VM.
 *
 * Block sizes: KC = 256 keeps the packed A block (MC x KC = 256 KiB) in the
 * 2 MiB per-core L2 while B micro-panels stream from L1/L2.  MC is an upper
 * bound, shrunk at run time so each thread gets equally sized row blocks
 * (load balance for odd n).  NC = 3072 bounds the packed B panel (6 MiB).
 * KC 128..512 and MC 64..256 all measured within noise of each other.
 *
 * Threading: the packed B panel is shared; it is packed cooperatively
 * (omp for over its NR panels; the implicit barrier publishes it).  Threads
 * then split the ic row blocks: each packs A into its own buffer and writes
 * a disjoint band of rows of C, so there are no races.  The implicit barrier
 * at the end of that loop keeps B from being repacked while in use.
 *
 * C is never read before being written: the first KC slice (pc == 0)
 * stores into C, later slices accumulate.  Edge tiles use zero-padded
 * packed panels and are written back through a small temporary.
 *
 * Measured on the 2-core dev VM (Xeon, AVX-512), gcc 12 -O3 -march=native:
 *   1 thread : n=512 59.4 GFLOPS, n=1024 49.9 GFLOPS
 *   2 threads: n=512 96.4 GFLOPS, n=1024 87.4 GFLOPS
 *   (medians of 5-10 interleaved runs; this shared VM drifts by up to 2x)
 *   numpy/OpenBLAS in the same runs: 48.4 / 52.2 (1T), 77.3 / 92.6 (2T)
 */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200112L  /* posix_memalign under -std=c99 */
#endif
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#ifdef __AVX512F__
#define VW 8          /* doubles per vector (AVX-512) */
#define NV 4          /* vectors per micro-tile row */
#else
#define VW 4          /* doubles per vector (AVX2) */
#define NV 2
#endif
#define MR 6          /* micro-tile rows */
#define NR (VW * NV)  /* micro-tile columns: 32 (AVX-512) or 8 (AVX2) */
#define KC 256
#define MC 128
#define NC 3072

typedef double vd __attribute__((vector_size(VW * sizeof(double))));

static inline int min_int(int a, int b) { return a < b ? a : b; }
static inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* Unaligned vector access to C (memcpy compiles to vmovupd). */
static inline vd loadu(const double *p) { vd v; memcpy(&v, p, sizeof v); return v; }
static inline void storeu(double *p, vd v) { memcpy(p, &v, sizeof v); }

/* One rank-1 update of the register tile: acc += a[0..MR) x b[0..NR). */
static inline __attribute__((always_inline)) void rank1(vd acc[MR][NV],
        const double *restrict a, const double *restrict b)
{
    vd bv[NV];
    for (int v = 0; v < NV; v++)
        bv[v] = *(const vd *)(b + VW * v);  /* packed B is 64-byte aligned */
    for (int i = 0; i < MR; i++) {
        const double ai = a[i];
        for (int v = 0; v < NV; v++)
            acc[i][v] += ai * bv[v];          /* broadcast + FMA */
    }
}

/*
 * Micro-kernel.  a: MR x kc packed panel (column k at a + k*MR),
 * b: kc x NR packed panel (row k at b + k*NR).  Invariant: after step k,
 * acc[i][v] = sum_{p<k} a[p*MR+i] * b[p*NR + VW*v .. VW*v+VW-1].
 * The tile is then stored to (first) or added into (!first) C.
 */
static inline __attribute__((always_inline)) void micro_kernel(int kc,
        const double *restrict a, const double *restrict b,
        double *restrict c, int ldc, int first)
{
    vd acc[MR][NV];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = (vd){0};

    int k = 0;
    for (; k + 1 < kc; k += 2) {  /* unrolled by two: less loop overhead */
        rank1(acc, a, b);
        rank1(acc, a + MR, b + NR);
        a += 2 * MR;
        b += 2 * NR;
    }
    if (k < kc)
        rank1(acc, a, b);

    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++) {
            double *p = c + (size_t)i * ldc + VW * v;
            storeu(p, first ? acc[i][v] : loadu(p) + acc[i][v]);
        }
}

/* Pack an mc x kc block of A (leading dim n) into MR-tall panels, zero-padding rows. */
static void pack_a(int n, int mc, int kc, const double *A, double *Ap)
{
    for (int ir = 0; ir < mc; ir += MR, Ap += (size_t)MR * kc) {
        for (int i = 0; i < MR; i++) {
            if (ir + i < mc) {
                const double *src = A + (size_t)(ir + i) * n;
                for (int k = 0; k < kc; k++)
                    Ap[k * MR + i] = src[k];
            } else {
                for (int k = 0; k < kc; k++)
                    Ap[k * MR + i] = 0.0;
            }
        }
    }
}

/* Pack a kc x nr slice of B (leading dim n) into one NR-wide panel, zero-padding columns. */
static void pack_b(int n, int nr, int kc, const double *B, double *Bp)
{
    for (int k = 0; k < kc; k++, Bp += NR) {
        const double *src = B + (size_t)k * n;
        int j = 0;
        for (; j < nr; j++) Bp[j] = src[j];
        for (; j < NR; j++) Bp[j] = 0.0;
    }
}

/* C block (mc x nc, leading dim n) op= packed A block x packed B panel. */
static void macro_kernel(int n, int mc, int nc, int kc, const double *Ap,
                         const double *Bp, double *C, int first)
{
    double tmp[MR * NR] __attribute__((aligned(64)));
    for (int jr = 0; jr < nc; jr += NR) {
        const int nr = min_int(NR, nc - jr);
        const double *b = Bp + (size_t)jr * kc;
        for (int ir = 0; ir < mc; ir += MR) {
            const int mr = min_int(MR, mc - ir);
            const double *a = Ap + (size_t)ir * kc;
            double *c = C + (size_t)ir * n + jr;
            if (mr == MR && nr == NR) {
                micro_kernel(kc, a, b, c, n, first);
            } else {  /* edge tile: compute full tile, copy back the valid part */
                micro_kernel(kc, a, b, tmp, NR, 1);
                for (int i = 0; i < mr; i++)
                    for (int j = 0; j < nr; j++) {
                        double *p = c + (size_t)i * n + j;
                        *p = first ? tmp[i * NR + j] : *p + tmp[i * NR + j];
                    }
            }
        }
    }
}

/* Fallback if the packing buffers cannot be allocated: unpacked i-k-j. */
static void dgemm_simple(int n, const double *A, const double *B, double *C)
{
    for (int i = 0; i < n; i++) {
        double *c = C + (size_t)i * n;
        memset(c, 0, (size_t)n * sizeof(double));
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                c[j] += A[(size_t)i * n + k] * B[(size_t)k * n + j];
    }
}

void dgemm(int n, const double *A, const double *B, double *C)
{
    /* Row blocks: at most MC rows each, count a multiple of the thread count. */
    const int nt = omp_get_max_threads();
    const int nblk0 = round_up((n + MC - 1) / MC, nt);
    const int mc_blk = round_up((n + nblk0 - 1) / nblk0, MR);
    const int nblk = (n + mc_blk - 1) / mc_blk;
    const int kcmax = min_int(KC, n);
    const size_t b_len = (size_t)kcmax * round_up(min_int(NC, n), NR);
    const size_t a_len = (size_t)round_up(mc_blk * kcmax, 8);  /* per thread, 64 B multiple */

    void *bp_raw = NULL, *ap_raw = NULL;
    if (posix_memalign(&bp_raw, 64, b_len * sizeof(double)) != 0) bp_raw = NULL;
    if (posix_memalign(&ap_raw, 64, (size_t)nt * a_len * sizeof(double)) != 0) ap_raw = NULL;
    double *Bp = bp_raw, *Ap = ap_raw;
    if (!Bp || !Ap) {
        free(Bp), free(Ap);
        dgemm_simple(n, A, B, C);
        return;
    }

    #pragma omp parallel num_threads(nt)
    {
        double *my_ap = Ap + (size_t)omp_get_thread_num() * a_len;
        for (int jc = 0; jc < n; jc += NC) {
            const int nc = min_int(NC, n - jc);
            for (int pc = 0; pc < n; pc += KC) {
                const int kc = min_int(KC, n - pc);
                #pragma omp for schedule(static)
                for (int jr = 0; jr < nc; jr += NR)
                    pack_b(n, min_int(NR, nc - jr), kc,
                           B + (size_t)pc * n + jc + jr, Bp + (size_t)jr * kc);

                #pragma omp for schedule(static)
                for (int ib = 0; ib < nblk; ib++) {
                    const int ic = ib * mc_blk;
                    const int mc = min_int(mc_blk, n - ic);
                    pack_a(n, mc, kc, A + (size_t)ic * n + pc, my_ap);
                    macro_kernel(n, mc, nc, kc, my_ap, Bp,
                                 C + (size_t)ic * n + jc, pc == 0);
                }
            }
        }
    }
    free(Bp);
    free(Ap);
}
