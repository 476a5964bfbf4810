/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Histogram of pixel intensities of a synthetic 8-bit image. Each pixel
 * increments the counter of its bin with an atomic update.
 */
#include <stdio.h>
#include <stdlib.h>

#define WIDTH  640
#define HEIGHT 480
#define NBINS  16

int main(void)
{
  unsigned char *image = malloc(WIDTH * HEIGHT);
  long hist[NBINS] = {0};

  for (int y = 0; y < HEIGHT; y++)
    for (int x = 0; x < WIDTH; x++)
      image[y * WIDTH + x] = (unsigned char) ((x * 3 + y * 5) & 0xff);

#pragma omp parallel for collapse(2)
  for (int y = 0; y < HEIGHT; y++)
    for (int x = 0; x < WIDTH; x++) {
      int bin = image[y * WIDTH + x] * NBINS / 256;
#pragma omp atomic
      hist[bin]++;
    }

  for (int b = 0; b < NBINS; b++)
    printf("bin %2d: %ld\n", b, hist[b]);
  free(image);
  return 0;
}
