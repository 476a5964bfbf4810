/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Count the nodes of a binary tree whose value exceeds a threshold, and
 * the number of nodes per depth level. The traversal spawns a task per
 * subtree, and each task spawns tasks for its children without waiting
 * for them; counts are updated atomically. The root task is awaited with
 * taskwait before the counts are printed, and the tree is released after
 * the parallel region.
 */
#include <stdio.h>
#include <stdlib.h>

#define DEPTH 16

typedef struct node {
  int value;
  int level;
  struct node *left, *right;
} node_t;

static node_t *build(int depth, int level, unsigned seed)
{
  if (depth == 0)
    return NULL;
  node_t *n = malloc(sizeof(node_t));
  n->value = (int) ((seed * 2654435761u) % 1000u);
  n->level = level;
  n->left = build(depth - 1, level + 1, 2 * seed + 1);
  n->right = build(depth - 1, level + 1, 2 * seed + 2);
  return n;
}

static void release(node_t *n)
{
  if (!n)
    return;
  release(n->left);
  release(n->right);
  free(n);
}

static long hits = 0;
static long per_level[DEPTH];

static void visit(node_t *n, int threshold)
{
  if (!n)
    return;
  if (n->value > threshold) {
#pragma omp atomic
    hits++;
  }
#pragma omp atomic
  per_level[n->level]++;

#pragma omp task firstprivate(n, threshold)
  visit(n->left, threshold);
#pragma omp task firstprivate(n, threshold)
  visit(n->right, threshold);
}

int main(void)
{
  node_t *root = build(DEPTH, 0, 0u);

#pragma omp parallel
  {
#pragma omp single
    {
#pragma omp task
      visit(root, 500);
#pragma omp taskwait
      printf("nodes above threshold: %ld\n", hits);
      for (int l = 0; l < DEPTH; l += 4)
        printf("level %2d: %ld nodes\n", l, per_level[l]);
    }
  }

  release(root);
  return 0;
}
