/* The monitor's inputs and checks (checks.c), used by monitor.c. */
#ifndef HPCRL_CHECKS_H
#define HPCRL_CHECKS_H
#include <stddef.h>

/* Report a failure on the result channel and end the job (monitor.c). */
void finish(const char *status, int size, const char *extra, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));
double now(void);

/* The shared matrices: a memfd of region_len bytes; A, B and C at off_abc[0..2]. */
extern char *region;
extern size_t region_len, off_abc[3];
extern int shm_fd;

int checks_init(int nmax, int vectors, double tolerance);
void layout(int nmax);
void fresh_inputs(int m);           /* fresh A, B (private copies kept), garbage C, guards */
void check_integrity(int m);        /* A and B unchanged, every guard intact */
double full_check(int m);           /* C against the reference; returns the worst relative error */
void freivalds_prepare(int n);      /* private vectors for the next timed call */
void freivalds_check(int n, int rep);
double speed_probe(void);           /* seconds of the host-speed probe */
#endif
