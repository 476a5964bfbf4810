/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Word length statistics of a text. One task per word is created from a
 * single thread; each task adds the length of its word to a shared counter.
 * The tasks are mergeable and are awaited with taskwait.
 */
#include <stdio.h>
#include <string.h>

static const char *words[] = {
  "parallel", "region", "worksharing", "loop", "task", "dependence",
  "barrier", "atomic", "critical", "flush", "reduction", "schedule",
  "static", "dynamic", "guided", "runtime", "thread", "team"
};

int main(void)
{
  int nwords = (int) (sizeof(words) / sizeof(words[0]));
  int letters = 0;

#pragma omp parallel
  {
#pragma omp single
    {
      for (int w = 0; w < nwords; w++) {
#pragma omp task mergeable shared(letters) firstprivate(w)
        letters += (int) strlen(words[w]);
      }
#pragma omp taskwait
      printf("%d words, %d letters\n", nwords, letters);
    }
  }
  return 0;
}
