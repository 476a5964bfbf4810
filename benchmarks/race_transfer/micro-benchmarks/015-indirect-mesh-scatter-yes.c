/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * One-dimensional finite-element assembly. Element e connects nodes
 * conn[2e] and conn[2e+1]; the element loop scatters half of the element
 * load to each of its two nodes through the connectivity table.
 */
#include <stdio.h>
#include <stdlib.h>

#define NELEM 1000
#define NNODE (NELEM + 1)

int main(void)
{
  int *conn = malloc(2 * NELEM * sizeof(int));
  double *load = malloc(NELEM * sizeof(double));
  double *force = calloc(NNODE, sizeof(double));

  for (int e = 0; e < NELEM; e++) {
    conn[2 * e] = e;
    conn[2 * e + 1] = e + 1;
    load[e] = 1.0 + 0.001 * e;
  }

#pragma omp parallel for
  for (int e = 0; e < NELEM; e++) {
    double half = 0.5 * load[e];
    force[conn[2 * e]] += half;
    force[conn[2 * e + 1]] += half;
  }

  double total = 0.0;
  for (int n = 0; n < NNODE; n++)
    total += force[n];
  printf("total nodal force = %f\n", total);

  free(conn);
  free(load);
  free(force);
  return 0;
}
