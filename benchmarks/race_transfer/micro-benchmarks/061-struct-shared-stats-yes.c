/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Particles in a unit box with reflecting walls, advanced by explicit
 * Euler steps under a constant downward acceleration. Every step gathers
 * statistics in a struct: the number of wall bounces, the kinetic energy
 * and the largest speed seen. The bounce counter is updated atomically,
 * the largest speed with a max reduction into a local variable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

typedef struct {
  double x, y, vx, vy, mass;
} particle_t;

typedef struct {
  int bounces;
  double kinetic;
  double vmax;
} step_stats_t;

static void reflect(double *pos, double *vel)
{
  if (*pos < 0.0) {
    *pos = -*pos;
    *vel = -*vel;
  } else if (*pos > 1.0) {
    *pos = 2.0 - *pos;
    *vel = -*vel;
  }
}

static void advance(particle_t *p, int n, double dt, double g, step_stats_t *stats)
{
  double vmax = 0.0;

#pragma omp parallel for reduction(max:vmax)
  for (int i = 0; i < n; i++) {
    p[i].vy -= g * dt;
    p[i].x += dt * p[i].vx;
    p[i].y += dt * p[i].vy;

    int hit = (p[i].x < 0.0 || p[i].x > 1.0 || p[i].y < 0.0 || p[i].y > 1.0);
    reflect(&p[i].x, &p[i].vx);
    reflect(&p[i].y, &p[i].vy);
    if (hit) {
#pragma omp atomic
      stats->bounces++;
    }

    double v2 = p[i].vx * p[i].vx + p[i].vy * p[i].vy;
    stats->kinetic += 0.5 * p[i].mass * v2;
    if (sqrt(v2) > vmax)
      vmax = sqrt(v2);
  }
  stats->vmax = vmax;
}

static void init_particles(particle_t *p, int n)
{
  for (int i = 0; i < n; i++) {
    p[i].x = (i % 100) / 100.0 + 0.005;
    p[i].y = (i % 37) / 37.0 + 0.01;
    p[i].vx = ((i % 7) - 3) * 0.1;
    p[i].vy = ((i % 5) - 2) * 0.1;
    p[i].mass = 1.0 + (i % 4) * 0.25;
  }
}

int main(int argc, char **argv)
{
  int n = (argc > 1) ? atoi(argv[1]) : 20000;
  int nsteps = 20;
  const double dt = 0.01, g = 9.81;
  particle_t *p = malloc(n * sizeof(particle_t));
  step_stats_t history[20];

  init_particles(p, n);

  for (int s = 0; s < nsteps; s++) {
    step_stats_t st = { 0, 0.0, 0.0 };
    advance(p, n, dt, g, &st);
    history[s] = st;
  }

  for (int s = 0; s < nsteps; s += 5)
    printf("step %2d: bounces=%6d kinetic=%12.4f vmax=%8.4f\n", s,
           history[s].bounces, history[s].kinetic, history[s].vmax);
  printf("final: kinetic=%f\n", history[nsteps - 1].kinetic);

  free(p);
  return 0;
}
