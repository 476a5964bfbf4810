/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Count the nodes of a binary tree whose value exceeds a threshold. The
 * traversal spawns a task per subtree, and each task spawns tasks for its
 * children without waiting for them; hits are counted atomically. The
 * traversal runs inside a taskgroup before the count is printed.
 */
#include <stdio.h>
#include <stdlib.h>

typedef struct node {
  int value;
  struct node *left, *right;
} node_t;

static node_t *build(int depth, int seed)
{
  if (depth == 0)
    return NULL;
  node_t *n = malloc(sizeof(node_t));
  n->value = (seed * 2654435761u) % 1000;
  n->left = build(depth - 1, 2 * seed + 1);
  n->right = build(depth - 1, 2 * seed + 2);
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

static void visit(node_t *n, int threshold)
{
  if (!n)
    return;
  if (n->value > threshold) {
#pragma omp atomic
    hits++;
  }
#pragma omp task firstprivate(n, threshold)
  visit(n->left, threshold);
#pragma omp task firstprivate(n, threshold)
  visit(n->right, threshold);
}

int main(void)
{
  node_t *root = build(16, 0);

#pragma omp parallel
  {
#pragma omp single
    {
#pragma omp taskgroup
      {
#pragma omp task
        visit(root, 500);
      }
      printf("nodes above threshold: %ld\n", hits);
    }
  }

  release(root);
  return 0;
}
