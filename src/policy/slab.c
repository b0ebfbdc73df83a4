/* slab.c — the "slab" policy: fixed-size pages and a block table per
 * allocation (a slab, as the paged KV cache uses it: PagedAttention
 * is an allocator redesign).
 *
 * Device segments (default 32 pages) are cut into pages of one size (default
 * 2 MiB). Free pages sit on one stack; ANY free page serves ANY request, so
 * there is no external fragmentation by design: a request of n pages succeeds
 * whenever n pages are free, wherever they lie. A request of at most one page
 * gets a page and its handle is the page's address. A larger request gets n
 * pages that need not be contiguous; its handle is a virtual address (a range
 * of its own above SLAB_VIRTUAL_BASE, never reused, never dereferenceable) and
 * grt_alloc_slab_pages reads its block table. The trade-off: no contiguous
 * memory for big requests — the consumer indexes through the table, as
 * PagedAttention's kernels do — and internal waste up to one page per request.
 *
 * Invariants (slab_check): every page of a live allocation is owned by it
 * (owner and index in the page record), every other page is on the free stack
 * exactly once (stack_pos names its slot); virtual handles are in `virt` and
 * below virt_next; statistics equal a recount (allocated_bytes = pages * page
 * size; inactive_split is always 0: pages are never split). Segments with no
 * used page go back to the device on empty_cache.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/bins.h"
#include "policy/zoo.h"
#include "base/status.h"
#include "base/u64map.h"

#define SLAB_DEFAULT_PAGE ((uint64_t)2 << 20)
#define SLAB_SEGMENT_BYTES ((uint64_t)64 << 20) /* pages per segment = this / page size, at least 1 */
#define SLAB_VIRTUAL_BASE ((grt_devptr)0xA000000000000000ull)
#define NOT_STACKED SIZE_MAX

typedef struct salloc {
  grt_devptr handle;
  uint64_t requested;
  size_t n_pages;
  grt_devptr pages[]; /* the block table */
} salloc;

typedef struct spage {
  salloc *owner;    /* NULL when free */
  size_t index;     /* position in owner->pages */
  size_t stack_pos; /* slot in the free stack, or NOT_STACKED */
} spage;

typedef struct gmem gmem;

typedef struct sseg {
  grt__zseg seg; /* its range (the segment table keeps a copy) */
  size_t n_pages, n_used;
  spage *pages;
  struct sseg *undo; /* segments added by the malloc in progress */
  gmem *mem;         /* where this struct and its page records live */
} sseg;

/* The host memory of the segments one gather may add, in one piece taken
 * before its first device call: segment structs and page records, handed out
 * in order. Its segments share it; the last one released frees it. */
struct gmem {
  size_t refs; /* segments living in it */
  size_t n_segs, n_recs, used_segs, used_recs;
  sseg *segs;
  spage *recs;
};

static gmem *gmem_new(size_t n_segs, size_t n_recs) {
  gmem *m = calloc(1, sizeof *m + n_segs * sizeof(sseg) + n_recs * sizeof(spage));
  if (!m) return NULL;
  m->n_segs = n_segs;
  m->n_recs = n_recs;
  m->segs = (sseg *)(m + 1);
  m->recs = (spage *)(m->segs + n_segs);
  return m;
}

typedef struct slab {
  grt__segtable segs;    /* sseg*, by base */
  grt__u64map live;      /* handle -> salloc */
  grt__bins *virt;       /* live virtual handles, keyed (0, handle): address order */
  grt_devptr *stack;     /* free pages */
  size_t n_free, cap_stack;
  size_t n_pages;        /* pages in all segments */
  uint64_t page_size;
  size_t seg_pages;
  grt_devptr virt_next;  /* the next virtual handle */
} slab;

static sseg *seg_at(const slab *s, size_t i) { return grt__segtable_at(&s->segs, i); }

static spage *page_of(const slab *s, grt_devptr addr, sseg **seg_out) {
  sseg *g = grt__segtable_find(&s->segs, addr);
  if (seg_out) *seg_out = g;
  return g ? &g->pages[(addr - g->seg.base) / s->page_size] : NULL;
}

static void set_page_size(slab *s, uint64_t bytes) {
  s->page_size = bytes;
  s->seg_pages = SLAB_SEGMENT_BYTES / bytes ? (size_t)(SLAB_SEGMENT_BYTES / bytes) : 1;
}

static grt_status slab_create(grt_allocator *a) {
  slab *s = calloc(1, sizeof *s);
  if (!s || grt__bins_create(&s->virt)) {
    free(s);
    return GRT_ERR_NOMEM;
  }
  grt__u64map_init(&s->live);
  set_page_size(s, SLAB_DEFAULT_PAGE);
  s->virt_next = SLAB_VIRTUAL_BASE;
  a->impl = s;
  return GRT_OK;
}

/* ---- the free stack ---- */

static void push_page(slab *s, grt_devptr addr, spage *p) {
  p->owner = NULL;
  p->stack_pos = s->n_free;
  s->stack[s->n_free++] = addr; /* cannot overflow: capacity covers every page */
}

static grt_devptr pop_page(slab *s, sseg **seg_out, spage **page_out) {
  grt_devptr addr = s->stack[--s->n_free];
  *page_out = page_of(s, addr, seg_out);
  (*page_out)->stack_pos = NOT_STACKED;
  return addr;
}

/* Removes the page at slot pos from the stack (the last one fills the hole). */
static void unstack(slab *s, size_t pos) {
  grt_devptr last = s->stack[--s->n_free];
  if (pos == s->n_free) return;
  s->stack[pos] = last;
  page_of(s, last, NULL)->stack_pos = pos;
}

/* ---- segments ---- */

/* A device segment of n_pages pages; its struct and page records come from m,
 * the stack and the table have room (gather_room). */
static grt_status add_segment(grt_allocator *a, gmem *m, size_t n_pages, sseg **out) {
  slab *s = a->impl;
  grt_devptr base;
  grt_status st = grt__zoo_device_malloc(a, n_pages * s->page_size, &base);
  if (st) return st;
  assert(m->used_segs < m->n_segs && m->used_recs + n_pages <= m->n_recs);
  sseg *g = &m->segs[m->used_segs++];
  spage *pages = m->recs + m->used_recs;
  m->used_recs += n_pages;
  m->refs++;
  *g = (sseg){.seg = {base, n_pages * s->page_size}, .n_pages = n_pages, .pages = pages, .mem = m};
  s->n_pages += n_pages;
  grt__segtable_add(&s->segs, g->seg.base, g->seg.size, g);
  for (size_t i = 0; i < n_pages; i++) push_page(s, g->seg.base + i * s->page_size, &pages[i]);
  *out = g;
  return GRT_OK;
}

static void forget_segment(slab *s, sseg *g) {
  for (size_t i = 0; i < g->n_pages; i++)
    if (g->pages[i].stack_pos != NOT_STACKED) unstack(s, g->pages[i].stack_pos);
  grt__segtable_remove(&s->segs, g->seg.base, g);
  s->n_pages -= g->n_pages;
  if (--g->mem->refs == 0) free(g->mem);
}

/* The device's status when it refuses (its own memory): nothing changes then. */
static grt_status release_segment(grt_allocator *a, sseg *g) {
  grt_status st = grt__zoo_device_free(a, g->seg.base, g->seg.size);
  if (!st) forget_segment(a->impl, g);
  return st;
}

static void slab_destroy(grt_allocator *a) {
  slab *s = a->impl;
  grt__u64map_iter it = grt__u64map_begin(&s->live);
  void *al;
  while (grt__u64map_next(&s->live, &it, NULL, &al)) free(al);
  while (s->segs.n) {
    sseg *g = seg_at(s, s->segs.n - 1);
    for (size_t i = 0; i < g->n_pages; i++) g->pages[i].owner = NULL;
    if (release_segment(a, g)) forget_segment(s, g); /* teardown (void op): a refusal leaves it to the device */
  }
  grt__segtable_free(&s->segs);
  grt__u64map_free(&s->live);
  grt__bins_destroy(s->virt);
  free(s->stack);
  free(s);
}

/* Everything a gather may need from host memory, before its first device
 * call. It adds at most `missing` segments: the first try of k >= missing
 * pages, or tries the device refused followed by segments of at most the
 * pages still missing each (at most k records in all): stack room for k more
 * pages, a table slot per segment, the structs. */
static grt_status gather_room(slab *s, size_t missing, size_t k, gmem **out) {
  if (s->n_pages + k > s->cap_stack) { /* the stack must be able to hold every page */
    size_t cap = s->cap_stack * 2 > s->n_pages + k ? s->cap_stack * 2 : s->n_pages + k;
    grt_devptr *st = realloc(s->stack, cap * sizeof *st);
    if (!st) return GRT_ERR_NOMEM;
    s->stack = st;
    s->cap_stack = cap;
  }
  if (grt__segtable_reserve(&s->segs, missing)) return GRT_ERR_NOMEM;
  *out = gmem_new(missing, k);
  return *out ? GRT_OK : GRT_ERR_NOMEM;
}

/* Grows the free stack to n pages: segments of the usual size, smaller ones
 * when the device cannot supply that. On failure every segment it added goes
 * back (the call changes nothing). */
static grt_status gather(grt_allocator *a, size_t n) {
  slab *s = a->impl;
  if (s->n_free >= n) return GRT_OK;
  sseg *added = NULL;
  size_t k = s->seg_pages > n - s->n_free ? s->seg_pages : n - s->n_free;
  gmem *m;
  grt_status st = gather_room(s, n - s->n_free, k, &m);
  if (st) return st;
  while (s->n_free < n) {
    size_t missing = n - s->n_free;
    sseg *g;
    st = add_segment(a, m, k, &g);
    if (st == GRT_OK) {
      g->undo = added;
      added = g;
      if (k > n - s->n_free && n > s->n_free) k = n - s->n_free;
      continue;
    }
    if (st == GRT_ERR_NOMEM || k == 1) break;
    k = k > missing ? missing : k / 2;
  }
  if (s->n_free >= n) return GRT_OK;
  if (!m->used_segs) free(m); /* else the last release below frees it */
  /* a segment the device refuses to take back stays, whole and free */
  for (sseg *next; added; added = next) {
    next = added->undo;
    grt_status back = release_segment(a, added);
    if (back) st = back; /* then the call reports the device's failure, not an OOM */
  }
  return st;
}

/* ---- malloc / free ---- */

/* Registers al under its handle (and in virt when virtual): the room was reserved. */
static void index_alloc(slab *s, salloc *al) {
  bool put = grt__u64map_put(&s->live, al->handle, al);
  grt_status st = al->n_pages > 1 ? grt__bins_insert(s->virt, 0, al->handle, al) : GRT_OK;
  assert(put && st == GRT_OK);
  (void)put, (void)st;
}

static grt_status slab_malloc(grt_allocator *a, uint64_t size, grt_stream_id stream, grt_devptr *out) {
  slab *s = a->impl;
  (void)stream; /* one page stack for every stream */
  uint64_t n64 = size / s->page_size + (size % s->page_size != 0);
  grt_device_stats ds;
  grt__ignore(grt_device_get_stats(a->dev, &ds)); /* a device and a buffer: it cannot fail */
  if (n64 > ds.capacity / s->page_size) { /* never servable: refused before its block table is sized by it */
    char why[96];
    snprintf(why, sizeof why, "it needs %llu pages and the device holds %llu", (unsigned long long)n64,
             (unsigned long long)(ds.capacity / s->page_size));
    return grt__zoo_oom(a, GRT_ERR_OOM, size, why);
  }
  size_t n = (size_t)n64;
  salloc *al = calloc(1, sizeof *al + n * sizeof al->pages[0]);
  if (!al || !grt__u64map_reserve(&s->live, 1) || (n > 1 && grt__bins_reserve(s->virt, 1))) {
    free(al); /* before the device: a failure changes nothing */
    return GRT_ERR_NOMEM;
  }
  size_t free_before = s->n_free;
  grt_status st = gather(a, n);
  if (st) {
    free(al);
    char why[96];
    snprintf(why, sizeof why, "it needs %zu pages, %zu are free and the device cannot supply the rest", n, s->n_free);
    return grt__zoo_oom(a, st, size, why);
  }
  al->requested = size;
  al->n_pages = n;
  al->handle = n == 1 ? s->stack[s->n_free - 1] : s->virt_next;
  index_alloc(s, al);
  if (free_before >= n) a->stats.num_cache_hits++;
  if (n > 1) s->virt_next += n * s->page_size;
  for (size_t i = 0; i < n; i++) {
    sseg *g;
    spage *p;
    al->pages[i] = pop_page(s, &g, &p);
    *p = (spage){al, i, NOT_STACKED};
    g->n_used++;
  }
  grt__zoo_account(a, n * s->page_size, size, +1);
  *out = al->handle;
  return GRT_OK;
}

/* Why ptr is not a live handle. */
static grt_status classify(grt_allocator *a, grt_devptr ptr) {
  slab *s = a->impl;
  if (ptr >= SLAB_VIRTUAL_BASE) {
    grt__bin_entry e;
    if (grt__bins_prev(s->virt, 0, ptr + 1, &e) && ptr - e.addr < ((salloc *)e.value)->n_pages * s->page_size) {
      grt__alloc_set_error(a, "0x%llx points %llu bytes inside the paged allocation at 0x%llx", (unsigned long long)ptr,
                           (unsigned long long)(ptr - e.addr), (unsigned long long)e.addr);
      return GRT_ERR_INTERIOR_POINTER;
    }
    if (ptr < s->virt_next) {
      grt__alloc_set_error(a, "double free of 0x%llx: the paged allocation there was freed", (unsigned long long)ptr);
      return GRT_ERR_DOUBLE_FREE;
    }
  } else if (page_of(s, ptr, NULL)) {
    const spage *p = page_of(s, ptr, NULL);
    if (!p->owner) {
      grt__alloc_set_error(a, "double free of 0x%llx: the address lies in a free page", (unsigned long long)ptr);
      return GRT_ERR_DOUBLE_FREE;
    }
    grt__alloc_set_error(a, "0x%llx lies in page %zu of the allocation at 0x%llx (free that handle)",
                         (unsigned long long)ptr, p->index, (unsigned long long)p->owner->handle);
    return GRT_ERR_INTERIOR_POINTER;
  }
  grt__alloc_set_error(a, "0x%llx was not returned by this allocator", (unsigned long long)ptr);
  return GRT_ERR_UNKNOWN_POINTER;
}

static grt_status slab_free(grt_allocator *a, grt_devptr ptr) {
  slab *s = a->impl;
  salloc *al = grt__u64map_get(&s->live, ptr);
  if (!al) return classify(a, ptr);
  for (size_t i = 0; i < al->n_pages; i++) {
    sseg *g;
    spage *p = page_of(s, al->pages[i], &g);
    push_page(s, al->pages[i], p);
    g->n_used--;
  }
  grt__u64map_del(&s->live, ptr);
  if (al->n_pages > 1) grt__bins_erase(s->virt, 0, ptr);
  grt__zoo_account(a, al->n_pages * s->page_size, al->requested, -1);
  free(al);
  return GRT_OK;
}

static grt_status slab_record_stream(grt_allocator *a, grt_devptr ptr, grt_stream_id stream) {
  (void)stream; /* stream order is the executor's concern */
  return grt__u64map_get(&((slab *)a->impl)->live, ptr) ? GRT_OK : classify(a, ptr);
}

static grt_status slab_empty_cache(grt_allocator *a) {
  slab *s = a->impl;
  grt_status st = GRT_OK;
  for (size_t i = s->segs.n; i-- > 0 && !st;)
    if (seg_at(s, i)->n_used == 0) st = release_segment(a, seg_at(s, i));
  return st;
}

static grt_status slab_block_info(grt_allocator *a, grt_devptr ptr, uint64_t *size, uint64_t *requested) {
  slab *s = a->impl;
  const salloc *al = grt__u64map_get(&s->live, ptr);
  if (!al) return classify(a, ptr);
  *size = al->n_pages * s->page_size;
  *requested = al->requested;
  return GRT_OK;
}

/* largest_free_block: every free page together, since any set of pages serves a request. */
static void slab_stats(grt_allocator *a, grt_alloc_stats *out) {
  slab *s = a->impl;
  out->largest_free_block = s->n_free * s->page_size;
  out->pending_free_blocks = 0;
}

/* ---- snapshot and the structure walker ---- */

static grt_status snap_segment(const slab *s, const sseg *g, grt_alloc_snapshot *out) {
  grt_snapshot_segment *seg = grt__zoo_snap_add(out, g->seg.base, g->n_pages);
  if (!seg) return GRT_ERR_NOMEM;
  seg->n_blocks = g->n_pages;
  for (size_t i = 0; i < g->n_pages; i++) {
    const spage *p = &g->pages[i];
    grt_snapshot_block *blk = &seg->blocks[i];
    *blk = (grt_snapshot_block){g->seg.base + i * s->page_size, s->page_size, 0, GRT_BLOCK_INACTIVE};
    if (!p->owner) continue;
    uint64_t before = p->index * s->page_size; /* the request's bytes held by earlier pages */
    uint64_t rest = p->owner->requested > before ? p->owner->requested - before : 0;
    blk->requested_size = rest < s->page_size ? rest : s->page_size;
    blk->state = GRT_BLOCK_ACTIVE_ALLOCATED;
  }
  grt__snapshot_segment_totals(seg);
  return GRT_OK;
}

static grt_status slab_snapshot(grt_allocator *a, grt_alloc_snapshot *out) {
  slab *s = a->impl;
  grt_status st = grt__zoo_snap_begin(out, s->segs.n);
  for (size_t i = 0; st == GRT_OK && i < s->segs.n; i++) st = snap_segment(s, seg_at(s, i), out);
  return st;
}

static grt_status check_alloc(const slab *s, const salloc *al, grt__zoo_recount *r, char *msg, size_t msg_size) {
  if (al->n_pages == 0 || al->requested == 0 || al->requested > al->n_pages * s->page_size ||
      al->requested <= (al->n_pages - 1) * s->page_size)
    GRT__ZOO_FAIL("allocation 0x%llx: %zu pages for %llu bytes", (unsigned long long)al->handle, al->n_pages,
                  (unsigned long long)al->requested);
  grt__bin_entry e;
  if (al->n_pages == 1 ? al->handle != al->pages[0]
                       : al->handle < SLAB_VIRTUAL_BASE || al->handle >= s->virt_next ||
                             !grt__bins_lower_bound(s->virt, 0, al->handle, &e) || e.value != al)
    GRT__ZOO_FAIL("allocation 0x%llx: bad handle", (unsigned long long)al->handle);
  for (size_t i = 0; i < al->n_pages; i++) {
    const spage *p = page_of(s, al->pages[i], NULL);
    if (!p || (al->pages[i] - ((const sseg *)grt__segtable_find(&s->segs, al->pages[i]))->seg.base) % s->page_size)
      GRT__ZOO_FAIL("allocation 0x%llx: page %zu at 0x%llx is not a page", (unsigned long long)al->handle, i,
                    (unsigned long long)al->pages[i]);
    if (p->owner != al || p->index != i || p->stack_pos != NOT_STACKED)
      GRT__ZOO_FAIL("allocation 0x%llx: page %zu is recorded as someone else's", (unsigned long long)al->handle, i);
  }
  r->allocation++;
  r->allocated_bytes += (int64_t)(al->n_pages * s->page_size);
  r->requested_bytes += (int64_t)al->requested;
  return GRT_OK;
}

static grt_status check_pages(const slab *s, grt__zoo_recount *r, size_t *owned, char *msg, size_t msg_size) {
  for (size_t i = 0; i < s->segs.n; i++) {
    const sseg *g = seg_at(s, i);
    size_t used = 0;
    if (i > 0 && seg_at(s, i - 1)->seg.base + seg_at(s, i - 1)->seg.size > g->seg.base)
      GRT__ZOO_FAIL("segments 0x%llx and 0x%llx overlap", (unsigned long long)seg_at(s, i - 1)->seg.base,
                    (unsigned long long)g->seg.base);
    for (size_t k = 0; k < g->n_pages; k++) {
      const spage *p = &g->pages[k];
      if (p->owner) used++;
      if (!p->owner && (p->stack_pos >= s->n_free || s->stack[p->stack_pos] != g->seg.base + k * s->page_size))
        GRT__ZOO_FAIL("free page 0x%llx is not on the free stack", (unsigned long long)(g->seg.base + k * s->page_size));
    }
    if (used != g->n_used || g->seg.size != g->n_pages * s->page_size)
      GRT__ZOO_FAIL("segment 0x%llx: %zu pages used, %zu counted", (unsigned long long)g->seg.base, used, g->n_used);
    *owned += used;
    r->segment++;
    r->reserved_bytes += (int64_t)g->seg.size;
  }
  return GRT_OK;
}

static grt_status slab_check(grt_allocator *a, char *msg, size_t msg_size) {
  slab *s = a->impl;
  grt__zoo_recount r;
  memset(&r, 0, sizeof r);
  size_t owned = 0, listed = 0, virtual_live = 0;
  grt_status st = check_pages(s, &r, &owned, msg, msg_size);
  if (st) return st;
  grt__u64map_iter it = grt__u64map_begin(&s->live);
  void *v;
  while (grt__u64map_next(&s->live, &it, NULL, &v)) {
    const salloc *al = v;
    if ((st = check_alloc(s, al, &r, msg, msg_size))) return st;
    listed += al->n_pages;
    virtual_live += al->n_pages > 1;
  }
  if (owned != listed) GRT__ZOO_FAIL("%zu pages owned but block tables list %zu", owned, listed);
  if (owned + s->n_free != s->n_pages || s->n_pages * s->page_size != (uint64_t)r.reserved_bytes)
    GRT__ZOO_FAIL("%zu pages owned + %zu free != pages in segments", owned, s->n_free);
  if (virtual_live != grt__bins_count(s->virt))
    GRT__ZOO_FAIL("%zu virtual handles indexed, %zu live", grt__bins_count(s->virt), virtual_live);
  return grt__zoo_check_stats(a, &r, msg, msg_size);
}

/* ---- settings (grt_alloc_set / grt_alloc_get) and calls specific to this policy ---- */

static grt_status slab_set(grt_allocator *a, const char *key, uint64_t bytes) {
  if (strcmp(key, "page_size")) return GRT_ERR_NOT_FOUND;
  slab *s = a->impl;
  if (bytes == 0 || bytes % GRT_MIN_BLOCK_SIZE || bytes > GRT__MAX_REQUEST) {
    grt__alloc_set_error(a, "page size %llu is not a positive multiple of 512", (unsigned long long)bytes);
    return GRT_ERR_INVALID_ARG;
  }
  if (s->segs.n) {
    grt__alloc_set_error(a, "the page size changes only while no segment is held (call empty_cache first)");
    return GRT_ERR_BUSY;
  }
  set_page_size(s, bytes);
  return GRT_OK;
}

static grt_status slab_get(grt_allocator *a, const char *key, uint64_t *value) {
  if (strcmp(key, "page_size")) return GRT_ERR_NOT_FOUND;
  *value = ((const slab *)a->impl)->page_size;
  return GRT_OK;
}

grt_status grt_alloc_slab_pages(grt_allocator *a, grt_devptr handle, grt_devptr *pages, size_t cap, size_t *n_pages) {
  if (!n_pages || (cap && !pages)) return GRT_ERR_INVALID_ARG;
  grt_status st = grt__zoo_enter(a, &grt__slab_ops);
  if (st) return st;
  const salloc *al = grt__u64map_get(&((slab *)a->impl)->live, handle);
  if (!al) return grt__zoo_leave(a, classify(a, handle));
  if (cap) memcpy(pages, al->pages, (cap < al->n_pages ? cap : al->n_pages) * sizeof *pages);
  *n_pages = al->n_pages;
  return grt__zoo_leave(a, GRT_OK);
}

const grt__alloc_ops grt__slab_ops = {
    .name = "slab",
    .create = slab_create,
    .destroy = slab_destroy,
    .malloc = slab_malloc,
    .free = slab_free,
    .record_stream = slab_record_stream,
    .empty_cache = slab_empty_cache,
    .block_info = slab_block_info,
    .stats = slab_stats,
    .snapshot = slab_snapshot,
    .check = slab_check,
    .set = slab_set,
    .get = slab_get,
    .settings = "page_size",
};
