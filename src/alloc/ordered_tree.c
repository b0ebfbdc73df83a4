/* ordered_tree.c — grt__otree as a treap (randomized balanced binary search tree).
 *
 * Keys are (size, addr), compared lexicographically. Heap order on a random
 * priority keeps the expected depth O(log n). Nodes come from a free list so
 * steady-state churn does not call malloc. This is the plain ordered tree the
 * O(1)-class index (bins.c) is measured and tested against; bins.c also uses
 * it for size classes that grow large.
 */
#include "alloc/ordered_tree.h"

#include <stdlib.h>

typedef struct node {
  uint64_t size, addr;
  void *value;
  uint64_t prio;
  struct node *left, *right;
} node;

struct grt__otree {
  node *root;
  node *free_nodes;
  size_t n_free; /* nodes on free_nodes */
  size_t count;
  uint64_t rng;
};

static int key_cmp(uint64_t s1, uint64_t a1, uint64_t s2, uint64_t a2) {
  if (s1 != s2) return s1 < s2 ? -1 : 1;
  if (a1 != a2) return a1 < a2 ? -1 : 1;
  return 0;
}

grt_status grt__otree_create(grt__otree **out) {
  grt__otree *b = calloc(1, sizeof *b);
  if (!b) return GRT_ERR_NOMEM;
  b->rng = 0x853c49e6748fea9bULL;
  *out = b;
  return GRT_OK;
}

static void free_tree(node *n) {
  while (n) {
    free_tree(n->left);
    node *r = n->right;
    free(n);
    n = r;
  }
}

void grt__otree_destroy(grt__otree *b) {
  if (!b) return;
  free_tree(b->root);
  while (b->free_nodes) {
    node *n = b->free_nodes;
    b->free_nodes = n->left;
    free(n);
  }
  free(b);
}

static uint64_t next_prio(grt__otree *b) {
  b->rng ^= b->rng << 13;
  b->rng ^= b->rng >> 7;
  b->rng ^= b->rng << 17;
  return b->rng;
}

/* Splits t into keys < (size, addr) and keys >= it. */
static void split(node *t, uint64_t size, uint64_t addr, node **lo, node **hi) {
  node **l = lo, **h = hi;
  while (t) {
    if (key_cmp(t->size, t->addr, size, addr) < 0) {
      *l = t;
      l = &t->right;
      t = t->right;
    } else {
      *h = t;
      h = &t->left;
      t = t->left;
    }
  }
  *l = *h = NULL;
}

/* Joins two treaps where every key of a is below every key of c. */
static node *join(node *a, node *c) {
  node *root = NULL, **link = &root;
  while (a && c) {
    if (a->prio > c->prio) {
      *link = a;
      link = &a->right;
      a = a->right;
    } else {
      *link = c;
      link = &c->left;
      c = c->left;
    }
  }
  *link = a ? a : c;
  return root;
}

grt_status grt__otree_insert(grt__otree *b, uint64_t size, uint64_t addr, void *value) {
  node **link = &b->root;
  node *n;
  /* Duplicate check on the search path. */
  for (n = b->root; n;) {
    int c = key_cmp(size, addr, n->size, n->addr);
    if (c == 0) return GRT_ERR_INVALID_ARG;
    n = c < 0 ? n->left : n->right;
  }
  if (b->free_nodes) {
    n = b->free_nodes;
    b->free_nodes = n->left;
    b->n_free--;
  } else if (!(n = malloc(sizeof *n))) {
    return GRT_ERR_NOMEM;
  }
  n->size = size;
  n->addr = addr;
  n->value = value;
  n->prio = next_prio(b);
  /* Descend while the existing nodes outrank the new one, then split there. */
  while (*link && (*link)->prio > n->prio)
    link = key_cmp(size, addr, (*link)->size, (*link)->addr) < 0 ? &(*link)->left : &(*link)->right;
  split(*link, size, addr, &n->left, &n->right);
  *link = n;
  b->count++;
  return GRT_OK;
}

bool grt__otree_erase(grt__otree *b, uint64_t size, uint64_t addr) {
  node **link = &b->root;
  while (*link) {
    int c = key_cmp(size, addr, (*link)->size, (*link)->addr);
    if (c == 0) {
      node *n = *link;
      *link = join(n->left, n->right);
      n->left = b->free_nodes;
      b->free_nodes = n;
      b->n_free++;
      b->count--;
      return true;
    }
    link = c < 0 ? &(*link)->left : &(*link)->right;
  }
  return false;
}

static bool fill(const node *n, grt__bin_entry *out) {
  if (!n) return false;
  if (out) *out = (grt__bin_entry){n->size, n->addr, n->value};
  return true;
}

bool grt__otree_lower_bound(const grt__otree *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  const node *best = NULL;
  for (const node *n = b->root; n;) {
    if (key_cmp(n->size, n->addr, size, addr) >= 0) {
      best = n;
      n = n->left;
    } else {
      n = n->right;
    }
  }
  return fill(best, out);
}

bool grt__otree_next(const grt__otree *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  const node *best = NULL;
  for (const node *n = b->root; n;) {
    if (key_cmp(n->size, n->addr, size, addr) > 0) {
      best = n;
      n = n->left;
    } else {
      n = n->right;
    }
  }
  return fill(best, out);
}

bool grt__otree_prev(const grt__otree *b, uint64_t size, uint64_t addr, grt__bin_entry *out) {
  const node *best = NULL;
  for (const node *n = b->root; n;) {
    if (key_cmp(n->size, n->addr, size, addr) < 0) {
      best = n;
      n = n->right;
    } else {
      n = n->left;
    }
  }
  return fill(best, out);
}

bool grt__otree_first(const grt__otree *b, grt__bin_entry *out) {
  const node *n = b->root;
  while (n && n->left) n = n->left;
  return fill(n, out);
}

bool grt__otree_last(const grt__otree *b, grt__bin_entry *out) {
  const node *n = b->root;
  while (n && n->right) n = n->right;
  return fill(n, out);
}

size_t grt__otree_count(const grt__otree *b) { return b->count; }

grt_status grt__otree_reserve(grt__otree *b, size_t n) {
  while (b->n_free < n) {
    node *x = malloc(sizeof *x);
    if (!x) return GRT_ERR_NOMEM;
    x->left = b->free_nodes;
    b->free_nodes = x;
    b->n_free++;
  }
  return GRT_OK;
}

size_t grt__otree_spare(const grt__otree *b) { return b->n_free; }

size_t grt__otree_lend(grt__otree *dst, grt__otree *src, size_t n) {
  size_t moved = 0;
  while (moved < n && src->free_nodes) {
    node *x = src->free_nodes;
    src->free_nodes = x->left;
    src->n_free--;
    x->left = dst->free_nodes;
    dst->free_nodes = x;
    dst->n_free++;
    moved++;
  }
  return moved;
}
