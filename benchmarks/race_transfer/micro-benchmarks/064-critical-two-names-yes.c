/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Inventory simulation: orders take items out of stock and deliveries put
 * items back. Orders and deliveries are handled in different named
 * critical sections.
 */
#include <stdio.h>

#define NEVENTS 10000

int main(void)
{
  int stock = 500;
  int orders = 0, deliveries = 0;

#pragma omp parallel for reduction(+:orders, deliveries)
  for (int e = 0; e < NEVENTS; e++) {
    if (e % 3 == 0) {
#pragma omp critical(delivery)
      stock += 2;
      deliveries++;
    } else {
#pragma omp critical(order)
      stock -= 1;
      orders++;
    }
  }

  printf("stock=%d orders=%d deliveries=%d\n", stock, orders, deliveries);
  return 0;
}
