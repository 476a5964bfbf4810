/* The kernel contract, force-included when a kernel is compiled: a definition with any other signature is a
 * compile-time "conflicting types" error, which the engine reports as a format violation (wrong signature). */
void dgemm(int n, const double *A, const double *B, double *C);
