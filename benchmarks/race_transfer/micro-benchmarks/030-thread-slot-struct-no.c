/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Per-thread partial statistics of a particle set. Every thread owns one
 * slot of an array of accumulator structs, selected by its thread number;
 * the slots are combined after the parallel region.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define NPART 100000

typedef struct {
  double mass;
  double px, py;
  long count;
  char pad[32];
} accum_t;

typedef struct {
  double m, vx, vy;
} particle_t;

int main(void)
{
  particle_t *p = malloc(NPART * sizeof(particle_t));
  int nslots = omp_get_max_threads();
  accum_t *acc = calloc(nslots, sizeof(accum_t));

  for (int i = 0; i < NPART; i++) {
    p[i].m = 1.0 + (i % 3);
    p[i].vx = 0.01 * (i % 100);
    p[i].vy = -0.02 * (i % 50);
  }

#pragma omp parallel
  {
    int tid = omp_get_thread_num();
#pragma omp for nowait
    for (int i = 0; i < NPART; i++) {
      acc[tid].mass += p[i].m;
      acc[tid].px += p[i].m * p[i].vx;
      acc[tid].py += p[i].m * p[i].vy;
      acc[tid].count++;
    }
  }

  accum_t total = {0};
  for (int t = 0; t < nslots; t++) {
    total.mass += acc[t].mass;
    total.px += acc[t].px;
    total.py += acc[t].py;
    total.count += acc[t].count;
  }
  printf("n=%ld mass=%f momentum=(%f, %f)\n", total.count, total.mass, total.px, total.py);

  free(acc);
  free(p);
  return 0;
}
