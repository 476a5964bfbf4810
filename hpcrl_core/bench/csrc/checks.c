/* hpcrl benchmark monitor, part 2: the inputs and the checks (monitor.c is the process and the protocol).
 *
 * Fresh random inputs per call from getrandom(), the shared matrices with their guard zones and 4K-staggered
 * offsets, the full check against a trusted reference, Freivalds products with private vectors, the integrity
 * of A and B, and the host-speed probe. Everything here runs in the monitor while the kernel's process is
 * stopped; nothing of it is shared with that process but the matrices A, B and C.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "checks.h"

#define GUARD 64 /* doubles of guard before and after every matrix */
#define GUARD_VALUE 7.25e300

/* ---------- random inputs: fresh entropy per call, xoshiro256** within it ---------- */
static uint64_t rs[4];

static void reseed(void) {
    size_t got = 0;
    while (got < sizeof rs) {
        ssize_t r = getrandom((char *)rs + got, sizeof rs - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) finish("driver_error", 0, NULL, "getrandom failed: %s", strerror(errno));
        got += (size_t)r;
    }
    if (!(rs[0] | rs[1] | rs[2] | rs[3])) rs[0] = 1;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(void) {
    uint64_t r = rotl(rs[1] * 5, 7) * 9, t = rs[1] << 17;
    rs[2] ^= rs[0]; rs[3] ^= rs[1]; rs[1] ^= rs[2]; rs[0] ^= rs[3]; rs[2] ^= t; rs[3] = rotl(rs[3], 45);
    return r;
}

static double urand(void) { return (double)(next_u64() >> 11) * (2.0 / 9007199254740992.0) - 1.0; }

/* ---------- shared matrices ---------- */
char *region;
size_t region_len, off_abc[3];
static double *A, *B, *C; /* shared: the kernel's process may write anything there, any time it runs */
int shm_fd = -1;

/* A, B and C start at different offsets modulo the 4 KiB page (0, 1344 and 2688 bytes): with equal offsets, rows
 * of B and C that a kernel streams together alias in the store-to-load check of x86 cores (4K aliasing), which
 * halved an i-k-j kernel's speed at n = 256 here. 64-byte alignment is kept. */
void layout(int nmax) {
    size_t block = ((size_t)nmax * nmax + 2 * GUARD) * sizeof(double) + 4096;
    block = (block + 4095) & ~(size_t)4095;
    for (int i = 0; i < 3; i++) off_abc[i] = i * block + GUARD * sizeof(double) + (size_t)i * 1344;
    region_len = 3 * block;
    shm_fd = memfd_create("hpcrl-matrices", MFD_CLOEXEC);
    if (shm_fd < 0 || ftruncate(shm_fd, (off_t)region_len) != 0)
        finish("driver_error", 0, NULL, "cannot create the shared matrices: %s", strerror(errno));
    region = mmap(NULL, region_len, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
    if (region == MAP_FAILED) finish("driver_error", 0, NULL, "cannot map the shared matrices: %s", strerror(errno));
    A = (double *)(region + off_abc[0]); B = (double *)(region + off_abc[1]); C = (double *)(region + off_abc[2]);
}

static void set_guards(double *p, size_t len) {
    for (size_t i = 0; i < GUARD; i++) p[-1 - (long)i] = p[len + i] = GUARD_VALUE;
}

static int guards_intact(const double *p, size_t len) {
    for (size_t i = 0; i < GUARD; i++)
        if (p[-1 - (long)i] != GUARD_VALUE || p[len + i] != GUARD_VALUE) return 0;
    return 1;
}

static void fill_random(double *x, size_t len) { for (size_t i = 0; i < len; i++) x[i] = urand(); }

static void fill_garbage(double *x, size_t len) { /* NaNs and large values: C += ... or reading C fails */
    for (size_t i = 0; i < len; i++) x[i] = (i & 1) ? NAN : 1e300 * urand();
}

static double *A0, *B0, *R, *Rabs, *fr, *fz, *fzb, *tmp, *tmpb;
static int fv;
static double tol;

/* The host's speed right now: a 64 x 64 i-k-j matrix product on private, cache-resident data (FMAs and L1/L2
 * traffic, like the kernels it stands for; ~25 us), timed just before each timed call while the kernel's process
 * is stopped. On a shared VM other tenants slow every kernel by up to 2x for hundreds of milliseconds, invisibly
 * to /proc/stat; the engine compares these figures with the node's best and prefers calls made at full speed. */
#define PROBE_N 64
static double pa[PROBE_N * PROBE_N], pb[PROBE_N * PROBE_N], pc[PROBE_N * PROBE_N];

double speed_probe(void) {
    if (pa[0] == 0.0)
        for (int i = 0; i < PROBE_N * PROBE_N; i++) { pa[i] = 1.0 / (i + 1); pb[i] = 1.0 - 1.0 / (i + 2); }
    volatile double warm = 0.0; /* its data back in cache first: the probe measures the host, not the cache */
    for (int i = 0; i < PROBE_N * PROBE_N; i += 8) warm += pa[i] + pb[i] + pc[i];
    double t0 = now();
    for (int i = 0; i < PROBE_N; i++) {
        double *c = pc + i * PROBE_N;
        for (int j = 0; j < PROBE_N; j++) c[j] = 0.0;
        for (int k = 0; k < PROBE_N; k++) {
            double a = pa[i * PROBE_N + k];
            const double *b = pb + k * PROBE_N;
            for (int j = 0; j < PROBE_N; j++) c[j] += a * b[j];
        }
    }
    double t = now() - t0;
    pa[0] += pc[PROBE_N + 1] * 1e-300; /* keep the product alive */
    return t;
}

/* Fresh inputs for a call at size m: A and B random (private copies kept), C garbage, guards set. */
void fresh_inputs(int m) {
    size_t len = (size_t)m * m;
    reseed();
    fill_random(A0, len); fill_random(B0, len);
    memcpy(A, A0, len * sizeof(double)); memcpy(B, B0, len * sizeof(double));
    fill_garbage(C, len);
    set_guards(A, len); set_guards(B, len); set_guards(C, len);
}

void check_integrity(int m) {
    size_t len = (size_t)m * m;
    if (memcmp(A, A0, len * sizeof(double)) != 0 || !guards_intact(A, len))
        finish("wrong", m, NULL, "the kernel modified input A (or wrote next to it) (n=%d)", m);
    if (memcmp(B, B0, len * sizeof(double)) != 0 || !guards_intact(B, len))
        finish("wrong", m, NULL, "the kernel modified input B (or wrote next to it) (n=%d)", m);
    if (!guards_intact(C, len)) finish("wrong", m, NULL, "the kernel wrote outside C (n=%d)", m);
}

/* Trusted reference: i-k-j loops; also accumulates |A||B| for the error bound. */
static void reference(int m) {
    size_t len = (size_t)m * m;
    memset(R, 0, len * sizeof(double)); memset(Rabs, 0, len * sizeof(double));
    for (int i = 0; i < m; i++)
        for (int k = 0; k < m; k++) {
            double a = A0[(size_t)i * m + k], aa = fabs(a);
            const double *b = B0 + (size_t)k * m;
            double *r = R + (size_t)i * m, *ra = Rabs + (size_t)i * m;
            for (int j = 0; j < m; j++) { r[j] += a * b[j]; ra[j] += aa * fabs(b[j]); }
        }
}

double full_check(int m) {
    size_t len = (size_t)m * m;
    reference(m);
    double worst = 0.0;
    for (size_t idx = 0; idx < len; idx++) {
        double c = C[idx], err = fabs(c - R[idx]);
        double bound = tol * m * DBL_EPSILON * Rabs[idx] + DBL_MIN;
        if (!isfinite(c) || !(err <= bound))
            finish("wrong", m, NULL, "C[%zu][%zu] = %.17g but A*B gives %.17g (allowed error %.3g) (n=%d)",
                   idx / (size_t)m, idx % (size_t)m, c, R[idx], bound, m);
        if (Rabs[idx] > 0 && err / Rabs[idx] > worst) worst = err / Rabs[idx];
    }
    return worst;
}

/* z = A (B r) and its magnitude bound zb = |A| (|B| |r|) for fv private random vectors r. */
void freivalds_prepare(int n) {
    for (int v = 0; v < fv; v++) {
        double *r = fr + (size_t)v * n, *z = fz + (size_t)v * n, *zb = fzb + (size_t)v * n;
        for (int j = 0; j < n; j++) r[j] = urand();
        for (int k = 0; k < n; k++) {
            double s = 0, sb = 0;
            const double *b = B0 + (size_t)k * n;
            for (int j = 0; j < n; j++) { s += b[j] * r[j]; sb += fabs(b[j]) * fabs(r[j]); }
            tmp[k] = s; tmpb[k] = sb;
        }
        for (int i = 0; i < n; i++) {
            double s = 0, sb = 0;
            const double *a = A0 + (size_t)i * n;
            for (int k = 0; k < n; k++) { s += a[k] * tmp[k]; sb += fabs(a[k]) * tmpb[k]; }
            z[i] = s; zb[i] = sb;
        }
    }
}

void freivalds_check(int n, int rep) {
    for (int v = 0; v < fv; v++) {
        const double *r = fr + (size_t)v * n, *z = fz + (size_t)v * n, *zb = fzb + (size_t)v * n;
        for (int i = 0; i < n; i++) {
            double s = 0;
            const double *c = C + (size_t)i * n;
            for (int j = 0; j < n; j++) s += c[j] * r[j];
            double bound = (tol + 4.0) * n * DBL_EPSILON * zb[i] + DBL_MIN;
            if (!isfinite(s) || !(fabs(s - z[i]) <= bound))
                finish("wrong", n, NULL, "timed call %d: (C r)[%d] = %.17g but A (B r) gives %.17g; the output does "
                       "not match this call's inputs when the kernel said done (cached, skipped or unfinished work?) "
                       "(n=%d)", rep, i, s, z[i], n);
        }
    }
}

/* The monitor's private buffers for sizes up to nmax, fv Freivalds vectors and the entry-wise tolerance. */
int checks_init(int nmax, int vectors, double tolerance) {
    fv = vectors;
    tol = tolerance;
    size_t big = (size_t)nmax * nmax * sizeof(double), vec = (size_t)fv * nmax * sizeof(double);
    A0 = malloc(big); B0 = malloc(big); R = malloc(big); Rabs = malloc(big);
    fr = malloc(vec); fz = malloc(vec); fzb = malloc(vec);
    tmp = malloc((size_t)nmax * sizeof(double)); tmpb = malloc((size_t)nmax * sizeof(double));
    return A0 && B0 && R && Rabs && fr && fz && fzb && tmp && tmpb;
}
