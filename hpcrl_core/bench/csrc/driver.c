/* hpcrl benchmark driver: verifies and times one DGEMM kernel linked into this binary.
 *
 * Owned by the project, never by the model. Linked with the kernel object after the link-level screen.
 * Usage (the engine builds the command line):
 *   driver FD N SIZES WARMUP MIN_REPS MAX_REPS MIN_TIME MAX_TIME TOL FV SEED
 * FD    file descriptor of the result channel (a pipe to the parent; the kernel cannot name write())
 * SIZES comma-separated sizes of the full check, e.g. "512,513,13"
 * Writes exactly one JSON object to FD:
 *   {"status":"ok","times":[...],"sizes":[...],"max_err":x}
 *   {"status":"wrong","size":m,"detail":"..."}      the kernel's fault
 *   {"status":"driver_error","detail":"..."}        the machinery's fault
 *
 * Checks (every one is the kernel's fault when it fails):
 * - full check at each size against a reference computed here, entry-wise
 *   |C - Cref| <= TOL * m * eps * (|A||B|) and every entry finite;
 * - guard words around A, B and C: a write outside C, or any write into A or B, is caught;
 * - every timed call gets fresh random inputs and a garbage-filled C, and its output is checked with FV
 *   Freivalds products, so a kernel that caches results between calls or skips work fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void dgemm(int n, const double *A, const double *B, double *C);

#define GUARD 64           /* doubles of guard before and after every matrix */
#define GUARD_VALUE 7.25e300
#define MAX_SIZES 8
#define MAX_REPS_CAP 100000

static int out_fd = -1;
static uint64_t rng_state = 88172645463325252ULL;

static uint64_t next_u64(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double urand(void) { /* uniform in [-1, 1) */
    return (double)(next_u64() >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static void emit(const char *json) {
    size_t len = strlen(json), off = 0;
    while (off < len) {
        ssize_t w = write(out_fd, json + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(3);
        off += (size_t)w;
    }
}

static void fail(const char *status, int size, const char *detail) {
    char buf[1024];
    snprintf(buf, sizeof buf, "{\"status\":\"%s\",\"size\":%d,\"detail\":\"%s (n=%d)\"}\n", status, size, detail,
             size);
    emit(buf);
    _exit(0);
}

/* A matrix with guard zones; p points at the first payload entry. */
typedef struct { double *base, *p; size_t len; } mat_t;

/* The payload is 64-byte aligned (the guard is a multiple of 64 bytes), as a BLAS caller would give it. */
static mat_t mat_alloc(size_t len) {
    mat_t m;
    m.len = len;
    void *p = NULL;
    if (posix_memalign(&p, 64, (len + 2 * GUARD) * sizeof(double)) != 0) p = NULL;
    m.base = p;
    if (!m.base) fail("driver_error", 0, "driver could not allocate its matrices (raise bench.sandbox.memory_mb)");
    m.p = m.base + GUARD;
    for (size_t i = 0; i < GUARD; i++) m.base[i] = m.p[len + i] = GUARD_VALUE;
    return m;
}

static int guards_intact(const mat_t *m) {
    for (size_t i = 0; i < GUARD; i++)
        if (m->base[i] != GUARD_VALUE || m->p[m->len + i] != GUARD_VALUE) return 0;
    return 1;
}

static void fill_random(double *x, size_t len) { for (size_t i = 0; i < len; i++) x[i] = urand(); }

static void fill_garbage(double *x, size_t len) { /* NaNs and large values: C += ... or reading C fails */
    for (size_t i = 0; i < len; i++) x[i] = (i & 1) ? NAN : 1e300 * urand();
}

/* Inputs unchanged and nothing written outside C: compare with the copies taken before the call. */
static void check_integrity(int m, const mat_t *A, const mat_t *B, const mat_t *C, const double *A0,
                            const double *B0) {
    size_t len = (size_t)m * m;
    if (memcmp(A->p, A0, len * sizeof(double)) != 0 || !guards_intact(A))
        fail("wrong", m, "the kernel modified input A (or wrote next to it)");
    if (memcmp(B->p, B0, len * sizeof(double)) != 0 || !guards_intact(B))
        fail("wrong", m, "the kernel modified input B (or wrote next to it)");
    if (!guards_intact(C)) fail("wrong", m, "the kernel wrote outside C");
}

/* Trusted reference: i-k-j loops; also accumulates |A||B| for the error bound. */
static void reference(int m, const double *A, const double *B, double *R, double *Rabs) {
    size_t len = (size_t)m * m;
    memset(R, 0, len * sizeof(double));
    memset(Rabs, 0, len * sizeof(double));
    for (int i = 0; i < m; i++)
        for (int k = 0; k < m; k++) {
            double a = A[(size_t)i * m + k], aa = fabs(a);
            const double *b = B + (size_t)k * m;
            double *r = R + (size_t)i * m, *ra = Rabs + (size_t)i * m;
            for (int j = 0; j < m; j++) { r[j] += a * b[j]; ra[j] += aa * fabs(b[j]); }
        }
}

static double full_check(int m, double tol) {
    size_t len = (size_t)m * m;
    mat_t A = mat_alloc(len), B = mat_alloc(len), C = mat_alloc(len);
    double *A0 = malloc(len * sizeof(double)), *B0 = malloc(len * sizeof(double));
    double *R = malloc(len * sizeof(double)), *Rabs = malloc(len * sizeof(double));
    if (!A0 || !B0 || !R || !Rabs) fail("driver_error", m, "driver could not allocate its reference");
    fill_random(A.p, len); fill_random(B.p, len); fill_garbage(C.p, len);
    memcpy(A0, A.p, len * sizeof(double)); memcpy(B0, B.p, len * sizeof(double));
    dgemm(m, A.p, B.p, C.p);
    check_integrity(m, &A, &B, &C, A0, B0);
    reference(m, A0, B0, R, Rabs);
    double worst = 0.0;
    for (size_t idx = 0; idx < len; idx++) {
        double c = C.p[idx], err = fabs(c - R[idx]);
        double bound = tol * m * DBL_EPSILON * Rabs[idx] + DBL_MIN;
        if (!isfinite(c) || !(err <= bound)) {
            char msg[256];
            snprintf(msg, sizeof msg, "C[%zu][%zu] = %.17g but A*B gives %.17g (allowed error %.3g)",
                     idx / (size_t)m, idx % (size_t)m, c, R[idx], bound);
            fail("wrong", m, msg);
        }
        if (Rabs[idx] > 0 && err / Rabs[idx] > worst) worst = err / Rabs[idx];
    }
    free(A.base); free(B.base); free(C.base); free(A0); free(B0); free(R); free(Rabs);
    return worst;
}

typedef struct { double *r, *z, *zb, *w; } freivalds_t;

/* Precompute z = A (B r) and its magnitude bound zb = |A| (|B| |r|) for each of fv random vectors r. */
static void freivalds_prepare(int n, int fv, const double *A, const double *B, freivalds_t *f, double *tmp,
                              double *tmpb) {
    for (int v = 0; v < fv; v++) {
        double *r = f->r + (size_t)v * n, *z = f->z + (size_t)v * n, *zb = f->zb + (size_t)v * n;
        for (int j = 0; j < n; j++) r[j] = urand();
        for (int k = 0; k < n; k++) {
            double s = 0, sb = 0;
            const double *b = B + (size_t)k * n;
            for (int j = 0; j < n; j++) { s += b[j] * r[j]; sb += fabs(b[j]) * fabs(r[j]); }
            tmp[k] = s; tmpb[k] = sb;
        }
        for (int i = 0; i < n; i++) {
            double s = 0, sb = 0;
            const double *a = A + (size_t)i * n;
            for (int k = 0; k < n; k++) { s += a[k] * tmp[k]; sb += fabs(a[k]) * tmpb[k]; }
            z[i] = s; zb[i] = sb;
        }
    }
}

static void freivalds_check(int n, int fv, const double *C, const freivalds_t *f, double tol, int rep) {
    for (int v = 0; v < fv; v++) {
        const double *r = f->r + (size_t)v * n, *z = f->z + (size_t)v * n, *zb = f->zb + (size_t)v * n;
        for (int i = 0; i < n; i++) {
            double s = 0;
            const double *c = C + (size_t)i * n;
            for (int j = 0; j < n; j++) s += c[j] * r[j];
            double bound = (tol + 4.0) * n * DBL_EPSILON * zb[i] + DBL_MIN;
            if (!isfinite(s) || !(fabs(s - z[i]) <= bound)) {
                char msg[256];
                snprintf(msg, sizeof msg,
                         "timed call %d: (C r)[%d] = %.17g but A (B r) gives %.17g; the output does not match "
                         "this call's inputs (cached or skipped work?)", rep, i, s, z[i]);
                fail("wrong", n, msg);
            }
        }
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 12) { fprintf(stderr, "driver: expected 11 arguments, got %d\n", argc - 1); return 2; }
    out_fd = atoi(argv[1]);
    int n = atoi(argv[2]);
    int warmup = atoi(argv[4]), min_reps = atoi(argv[5]), max_reps = atoi(argv[6]);
    double min_time = atof(argv[7]), max_time = atof(argv[8]), tol = atof(argv[9]);
    int fv = atoi(argv[10]);
    rng_state ^= strtoull(argv[11], NULL, 10) * 0x9E3779B97F4A7C15ULL;
    if (rng_state == 0) rng_state = 1;
    if (n < 1 || fv < 1 || max_reps < 1 || max_reps > MAX_REPS_CAP) fail("driver_error", n, "bad driver arguments");

    /* 1. full checks */
    int sizes[MAX_SIZES], nsizes = 0;
    double worst = 0.0;
    for (char *s = strtok(argv[3], ","); s && nsizes < MAX_SIZES; s = strtok(NULL, ",")) sizes[nsizes++] = atoi(s);
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 1) fail("driver_error", sizes[i], "bad check size");
        double w = full_check(sizes[i], tol);
        if (w > worst) worst = w;
    }

    /* 2. timed calls, each on fresh inputs and checked */
    size_t len = (size_t)n * n;
    mat_t A = mat_alloc(len), B = mat_alloc(len), C = mat_alloc(len);
    double *A0 = malloc(len * sizeof(double)), *B0 = malloc(len * sizeof(double));
    freivalds_t f = {malloc((size_t)fv * n * sizeof(double)), malloc((size_t)fv * n * sizeof(double)),
                     malloc((size_t)fv * n * sizeof(double)), NULL};
    double *tmp = malloc((size_t)n * sizeof(double)), *tmpb = malloc((size_t)n * sizeof(double));
    double *times = malloc((size_t)max_reps * sizeof(double));
    if (!A0 || !B0 || !f.r || !f.z || !f.zb || !tmp || !tmpb || !times)
        fail("driver_error", n, "driver could not allocate its timing buffers (raise bench.sandbox.memory_mb)");
    int reps = 0;
    double total = 0.0;
    for (int call = 0;; call++) {
        fill_random(A.p, len); fill_random(B.p, len); fill_garbage(C.p, len);
        memcpy(A0, A.p, len * sizeof(double)); memcpy(B0, B.p, len * sizeof(double));
        freivalds_prepare(n, fv, A0, B0, &f, tmp, tmpb);
        double t0 = now();
        dgemm(n, A.p, B.p, C.p);
        double t = now() - t0;
        check_integrity(n, &A, &B, &C, A0, B0);
        freivalds_check(n, fv, C.p, &f, tol, call);
        if (call < warmup) continue;
        times[reps++] = t;
        total += t;
        if (reps >= max_reps || (reps >= min_reps && total >= min_time) || (reps >= 3 && total >= max_time)) break;
    }

    /* 3. report */
    size_t cap = 128 + (size_t)reps * 26 + (size_t)nsizes * 12;
    char *buf = malloc(cap);
    if (!buf) fail("driver_error", n, "driver could not allocate its report");
    size_t off = (size_t)snprintf(buf, cap, "{\"status\":\"ok\",\"max_err\":%.6g,\"sizes\":[", worst);
    for (int i = 0; i < nsizes; i++) off += (size_t)snprintf(buf + off, cap - off, "%s%d", i ? "," : "", sizes[i]);
    off += (size_t)snprintf(buf + off, cap - off, "],\"times\":[");
    for (int i = 0; i < reps; i++) off += (size_t)snprintf(buf + off, cap - off, "%s%.9e", i ? "," : "", times[i]);
    snprintf(buf + off, cap - off, "]}\n");
    emit(buf);
    return 0;
}
