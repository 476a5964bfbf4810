/* An independent, plain C harness for comparing the engine's figures: the kernel is linked in, called in this
 * process on fixed random inputs, and timed with clock_gettime around each call; nothing is verified. Used by
 * benchmarks/bench_throughput.py, which builds it with the engine's flags and links one kernel object.
 *
 * Usage: plain_harness N MIN_TIME_S  -> prints {"times":[...]} (seconds per call after one warm-up call)
 * A, B and C sit at different offsets modulo 4 KiB, as in the engine: equal offsets make loads of B and stores to
 * C alias in the core's store-to-load check and halve some kernels' speed (docs/bench.md). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void dgemm(int n, const double *A, const double *B, double *C);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: plain_harness N MIN_TIME_S\n"); return 2; }
    int n = atoi(argv[1]);
    double min_time = atof(argv[2]);
    size_t len = (size_t)n * n, block = ((len * sizeof(double) + 8192) + 4095) & ~(size_t)4095;
    char *base = aligned_alloc(4096, 3 * block);
    if (!base) return 1;
    double *A = (double *)base, *B = (double *)(base + block + 1344), *C = (double *)(base + 2 * block + 2688);
    srand(12345);
    for (size_t i = 0; i < len; i++) { A[i] = 2.0 * rand() / RAND_MAX - 1; B[i] = 2.0 * rand() / RAND_MAX - 1; }
    dgemm(n, A, B, C); /* warm-up */
    static double times[100000];
    int reps = 0;
    double total = 0;
    while (reps < 100000 && (reps < 5 || total < min_time)) {
        double t0 = now();
        dgemm(n, A, B, C);
        times[reps] = now() - t0;
        total += times[reps++];
    }
    printf("{\"times\":[");
    for (int i = 0; i < reps; i++) printf("%s%.9e", i ? "," : "", times[i]);
    printf("]}\n");
    return C[0] != C[0]; /* keep the result alive */
}
