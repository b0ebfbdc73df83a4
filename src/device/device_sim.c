/* device_sim.c — the simulated device backend: one address space, first fit.
 *
 * Free space is a set of holes in address order (holes.h: first fit in
 * O(log n)); a malloc takes the front of the first hole that fits (lowest
 * address), a free re-inserts the range and merges it with the holes
 * touching it. Invariants (checked by tests through the public
 * stats): holes are sorted, disjoint, never adjacent (adjacent holes are always
 * merged), and holes + live segments tile [base, base + span).
 *
 * The two models (gpurt/device.h) share that machinery. Contiguous: span is
 * the capacity and in_use the bytes of the live segments, so the holes are the
 * free memory. Paged: span is a virtual space of 8 x capacity (at most
 * VA_OFFSET), the holes only keep addresses distinct, and memory is a count of
 * 2 MiB pages: in_use is the bytes of the pages the segments hold, and a
 * malloc is refused only when too few pages are free (VA running out first
 * would need more fragmentation than 8x leaves room for). Mapped pages of a
 * reservation are 2 MiB segments in either model, so they count the same way.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "device/device_impl.h"
#include "device/holes.h"

#define PAGE ((uint64_t)2 << 20)
#define VA_OFFSET ((uint64_t)1 << 44) /* reservations live above the physical range */

typedef struct reservation {
  grt_devptr va;
  uint64_t size;
  grt_devptr *phys; /* per page: the physical page backing it, 0 = unmapped */
  uint64_t *piece;  /* per mapped page: the first page of the map call that mapped it */
  uint64_t mapped_pages;
} reservation;

typedef struct sim {
  grt_devptr base;
  uint64_t capacity;
  uint64_t span;       /* bytes of segment address space from base: capacity, or the paged model's VA */
  uint64_t page_limit; /* paged model: bytes of the whole pages in capacity; 0 = contiguous model */
  uint64_t in_use;     /* bytes charged: segment sizes, or their pages (paged) */
  grt__holes holes;
  grt__u64map live;   /* segment start -> size (stored as uintptr_t) */
  grt__u64map freed;  /* start addresses freed and not live again: double-free detection */
  unsigned char *host; /* capacity bytes when host backing is on, else NULL */
  reservation *res;    /* sorted by va (va only grows) */
  size_t n_res, cap_res;
  grt_devptr next_va, va_end; /* reservations take [next_va, va_end), upwards */
  grt__u64map pages;   /* physical page address -> 1: live entries that are pages, not segments */
  uint64_t mapped_pages;
} sim;

/* The segment address space of a config: the capacity, or the paged model's
 * larger virtual space (8 x capacity, kept below the reservations). */
static uint64_t span_of(const grt_device_config *cfg) {
  if (cfg->model != GRT_DEVICE_MODEL_PAGED) return cfg->capacity;
  return cfg->capacity <= VA_OFFSET / 8 ? cfg->capacity * 8 : VA_OFFSET;
}

/* Reservations get address space of their own: VA_OFFSET above the base
 * (or past the segment space, should it span more), or, on a device too
 * close to 2^64 for that, below its base; never wrapping past 2^64, never
 * at 0. */
static void place_va(sim *s) {
  uint64_t room = UINT64_MAX - s->base, gap = s->span > VA_OFFSET ? s->span : VA_OFFSET;
  if (gap < room && room - gap >= VA_OFFSET) {
    s->next_va = s->base + gap;
    s->va_end = (grt_devptr)0 - PAGE;
  } else {
    s->next_va = PAGE;
    s->va_end = s->base;
  }
}

static grt_status check_paged(const grt_device_config *cfg) {
  if (cfg->model != GRT_DEVICE_MODEL_PAGED) return GRT_OK;
  if (cfg->capacity < PAGE || cfg->base_address + span_of(cfg) < cfg->base_address) return GRT_ERR_INVALID_ARG;
  return cfg->host_backing ? GRT_ERR_UNSUPPORTED : GRT_OK; /* a host copy of 8x capacity is no model */
}

grt_status grt__device_sim_create(const grt_device_config *cfg, void **impl) {
  grt_status cst = check_paged(cfg);
  if (cst) return cst;
  sim *s = calloc(1, sizeof *s);
  if (!s) return GRT_ERR_NOMEM;
  s->base = cfg->base_address;
  s->capacity = cfg->capacity;
  s->span = span_of(cfg);
  s->page_limit = cfg->model == GRT_DEVICE_MODEL_PAGED ? cfg->capacity / PAGE * PAGE : 0;
  grt__holes_init(&s->holes);
  if (!grt__holes_insert(&s->holes, cfg->base_address, s->span)) goto fail;
  grt__u64map_init(&s->live);
  grt__u64map_init(&s->freed);
  grt__u64map_init(&s->pages);
  place_va(s);
  if (cfg->host_backing) {
    s->host = calloc(1, (size_t)cfg->capacity);
    if (!s->host) goto fail;
  }
  *impl = s;
  return GRT_OK;
fail:
  grt__holes_free(&s->holes);
  free(s);
  return GRT_ERR_NOMEM;
}

static void sim_destroy(void *impl) {
  sim *s = impl;
  grt__u64map_free(&s->live);
  grt__u64map_free(&s->freed);
  grt__u64map_free(&s->pages);
  for (size_t i = 0; i < s->n_res; i++) {
    free(s->res[i].phys);
    free(s->res[i].piece);
  }
  free(s->res);
  grt__holes_free(&s->holes);
  free(s->host);
  free(s);
}

static int ensure_holes_room(sim *s, size_t n) { return grt__holes_reserve(&s->holes, n); }

static int ensure_hole_room(sim *s) { return ensure_holes_room(s, 1); }

/* Room for freeing n segments: after it, n calls of sim_free on live
 * segments cannot fail. */
static int reserve_frees(sim *s, size_t n) { return ensure_holes_room(s, n) && grt__u64map_reserve(&s->freed, n); }

/* Bytes a segment of size holds: whole pages in the paged model. */
static uint64_t charge(const sim *s, uint64_t size) { return s->page_limit ? (size + PAGE - 1) / PAGE * PAGE : size; }

/* Paged model: too few free pages for a segment of size. */
static int pages_short(const sim *s, uint64_t size) {
  return s->page_limit && charge(s, size) > s->page_limit - s->in_use;
}

/* Marks [addr, addr+size) (inside hole h) as a live segment. */
static grt_status take_from_hole(sim *s, grt__hole h, grt_devptr addr, uint64_t size) {
  int keep_front = addr > h.addr, keep_back = addr + size < h.addr + h.size;
  if (keep_front && keep_back && !ensure_hole_room(s)) return GRT_ERR_NOMEM;
  if (!grt__u64map_put(&s->live, addr, (void *)(uintptr_t)size)) return GRT_ERR_NOMEM;
  grt__u64map_del(&s->freed, addr);
  if (keep_front) grt__holes_update(&s->holes, h.addr, h.addr, addr - h.addr);
  if (keep_front && keep_back) {
    bool added = grt__holes_insert(&s->holes, addr + size, h.addr + h.size - addr - size);
    assert(added); /* reserved above */
    (void)added;
  } else if (keep_back) {
    grt__holes_update(&s->holes, h.addr, addr + size, h.size - size);
  } else if (!keep_front) {
    grt__holes_erase(&s->holes, h.addr);
  }
  s->in_use += charge(s, size);
  return GRT_OK;
}

static grt_status sim_malloc(void *impl, uint64_t size, grt_devptr *out) {
  sim *s = impl;
  if (pages_short(s, size)) return GRT_ERR_OOM;
  grt__hole h;
  if (!grt__holes_first_fit(&s->holes, size, &h)) return GRT_ERR_OOM;
  grt_status st = take_from_hole(s, h, h.addr, size);
  if (st == GRT_OK) *out = h.addr;
  return st;
}

static grt_status sim_malloc_at(void *impl, grt_devptr addr, uint64_t size) {
  sim *s = impl;
  if (addr < s->base || addr + size > s->base + s->span || addr + size < addr || pages_short(s, size))
    return GRT_ERR_OOM;
  grt__hole h; /* the only hole that can contain addr */
  if (!grt__holes_end_above(&s->holes, addr, &h) || h.addr > addr || h.addr + h.size < addr + size)
    return GRT_ERR_OOM;
  return take_from_hole(s, h, addr, size);
}

/* Classifies an address that is not the start of a live segment. */
static grt_status classify_bad(const sim *s, grt_devptr ptr) {
  if (grt__u64map_get(&s->pages, ptr)) return GRT_ERR_UNKNOWN_POINTER; /* a mapped page, not a segment */
  if (ptr < s->base || ptr >= s->base + s->span) return GRT_ERR_UNKNOWN_POINTER;
  grt__hole h;
  int in_free_space = grt__holes_end_above(&s->holes, ptr, &h) && h.addr <= ptr;
  if (!in_free_space) return GRT_ERR_INTERIOR_POINTER; /* inside a live segment (even if once freed) */
  return grt__u64map_get(&s->freed, ptr) ? GRT_ERR_DOUBLE_FREE : GRT_ERR_UNKNOWN_POINTER;
}

static grt_status sim_free(void *impl, grt_devptr ptr) {
  sim *s = impl;
  uint64_t size = (uint64_t)(uintptr_t)grt__u64map_get(&s->live, ptr);
  /* Mapped pages are live entries too, but only unmap may return them
     (unmap_pages drops a page from `pages` before freeing it here). */
  if (!size || grt__u64map_get(&s->pages, ptr)) return classify_bad(s, ptr);
  if (!ensure_hole_room(s)) return GRT_ERR_NOMEM;
  if (!grt__u64map_put(&s->freed, ptr, (void *)1)) return GRT_ERR_NOMEM;
  grt__u64map_del(&s->live, ptr);
  grt__hole prev, next; /* the holes either side of the segment */
  int merge_prev = grt__holes_before(&s->holes, ptr, &prev) && prev.addr + prev.size == ptr;
  int merge_next = grt__holes_end_above(&s->holes, ptr, &next) && next.addr == ptr + size;
  if (merge_prev && merge_next) {
    grt__holes_erase(&s->holes, next.addr);
    grt__holes_update(&s->holes, prev.addr, prev.addr, prev.size + size + next.size);
  } else if (merge_prev) {
    grt__holes_update(&s->holes, prev.addr, prev.addr, prev.size + size);
  } else if (merge_next) {
    grt__holes_update(&s->holes, next.addr, ptr, next.size + size);
  } else {
    bool added = grt__holes_insert(&s->holes, ptr, size);
    assert(added); /* reserved above */
    (void)added;
  }
  s->in_use -= charge(s, size);
  return GRT_OK;
}

static grt_status sim_segment_size(void *impl, grt_devptr ptr, uint64_t *size) {
  sim *s = impl;
  uint64_t sz = (uint64_t)(uintptr_t)grt__u64map_get(&s->live, ptr);
  if (!sz || grt__u64map_get(&s->pages, ptr)) return classify_bad(s, ptr);
  *size = sz;
  return GRT_OK;
}

static reservation *find_res(sim *s, grt_devptr va) {
  for (size_t i = 0; i < s->n_res; i++)
    if (va >= s->res[i].va && va < s->res[i].va + s->res[i].size) return &s->res[i];
  return NULL;
}

static grt_status sim_host_ptr(void *impl, grt_devptr ptr, uint64_t len, void **out) {
  sim *s = impl;
  if (!s->host) return GRT_ERR_UNSUPPORTED;
  reservation *r = find_res(s, ptr);
  if (r) { /* virtual: translate within one page */
    uint64_t page = (ptr - r->va) / PAGE, off = (ptr - r->va) % PAGE;
    if (!r->phys[page] || len > PAGE - off) return GRT_ERR_UNKNOWN_POINTER;
    *out = s->host + (r->phys[page] - s->base) + off;
    return GRT_OK;
  }
  if (ptr < s->base || ptr >= s->base + s->capacity || len > s->base + s->capacity - ptr)
    return GRT_ERR_UNKNOWN_POINTER;
  grt__hole h;
  if (grt__holes_end_above(&s->holes, ptr, &h) && h.addr < ptr + (len ? len : 1)) return GRT_ERR_UNKNOWN_POINTER;
  *out = s->host + (ptr - s->base);
  return GRT_OK;
}

static void sim_memory_stats(void *impl, grt_device_stats *st) {
  sim *s = impl;
  st->capacity = s->capacity;
  st->bytes_in_use = s->in_use;
  st->holes = s->holes.count;
  st->segments = s->live.count - s->mapped_pages;
  st->mapped_bytes = s->mapped_pages * PAGE;
  st->reserved_va_bytes = 0;
  for (size_t i = 0; i < s->n_res; i++) st->reserved_va_bytes += s->res[i].size;
  st->largest_hole = 0;
  if (s->page_limit) { /* any free pages serve any request: one hole of all of them */
    st->largest_hole = s->page_limit - s->in_use;
    st->holes = st->largest_hole ? 1 : 0;
    return;
  }
  st->largest_hole = grt__holes_largest(&s->holes);
}

static uint64_t sim_bytes_in_use(void *impl) { return ((sim *)impl)->in_use; }

static uint64_t sim_charge_unit(void *impl) { return ((sim *)impl)->page_limit ? PAGE : 1; }

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static grt_status sim_walk(void *impl, grt_device_segment_fn fn, void *ctx) {
  sim *s = impl;
  uint64_t *addrs = malloc((s->live.count + 1) * sizeof *addrs);
  size_t n = 0;
  if (!addrs) return GRT_ERR_NOMEM;
  grt__u64map_iter it = grt__u64map_begin(&s->live);
  uint64_t addr;
  while (grt__u64map_next(&s->live, &it, &addr, NULL))
    if (!grt__u64map_get(&s->pages, addr)) addrs[n++] = addr;
  qsort(addrs, n, sizeof *addrs, cmp_u64);
  for (size_t i = 0; i < n; i++) fn(ctx, addrs[i], (uint64_t)(uintptr_t)grt__u64map_get(&s->live, addrs[i]));
  free(addrs);
  return GRT_OK;
}

/* ---- virtual memory ---- */

static grt_status sim_vmm_granularity(void *impl, uint64_t *bytes) {
  (void)impl;
  *bytes = PAGE;
  return GRT_OK;
}

static grt_status sim_reserve(void *impl, uint64_t size, grt_devptr *va) {
  sim *s = impl;
  if (s->next_va >= s->va_end || size > s->va_end - s->next_va) return GRT_ERR_OOM; /* no address space left */
  if (s->n_res == s->cap_res) {
    size_t cap = s->cap_res ? s->cap_res * 2 : 4;
    reservation *r = realloc(s->res, cap * sizeof *r);
    if (!r) return GRT_ERR_NOMEM;
    s->res = r;
    s->cap_res = cap;
  }
  grt_devptr *phys = calloc(size / PAGE, sizeof *phys);
  uint64_t *piece = calloc(size / PAGE, sizeof *piece);
  if (!phys || !piece) {
    free(phys);
    free(piece);
    return GRT_ERR_NOMEM;
  }
  s->res[s->n_res++] = (reservation){s->next_va, size, phys, piece, 0};
  *va = s->next_va;
  s->next_va = size + PAGE < s->va_end - s->next_va ? s->next_va + size + PAGE : s->va_end; /* a guard page between */
  return GRT_OK;
}

/* The caller reserved room for n frees (reserve_frees), so none can fail. */
static void unmap_pages(sim *s, reservation *r, uint64_t first, uint64_t n) {
  for (uint64_t p = first; p < first + n; p++) {
    if (!r->phys[p]) continue;
    grt__u64map_del(&s->pages, r->phys[p]);
    grt_status st = sim_free(s, r->phys[p]);
    assert(st == GRT_OK);
    (void)st;
    r->phys[p] = 0;
    r->mapped_pages--;
    s->mapped_pages--;
  }
}

static grt_status sim_map(void *impl, grt_devptr va, uint64_t size) {
  sim *s = impl;
  reservation *r = find_res(s, va);
  if (!r || size > r->va + r->size - va) return GRT_ERR_INVALID_ARG; /* no sum: a size may wrap it */
  uint64_t first = (va - r->va) / PAGE, n = size / PAGE;
  for (uint64_t p = first; p < first + n; p++)
    if (r->phys[p]) return GRT_ERR_INVALID_ARG; /* already mapped */
  if (!reserve_frees(s, n + 1)) return GRT_ERR_NOMEM; /* the undo below cannot fail */
  for (uint64_t p = first; p < first + n; p++) {
    grt_devptr phys;
    grt_status st = sim_malloc(s, PAGE, &phys);
    if (st == GRT_OK && !grt__u64map_put(&s->pages, phys, (void *)1)) {
      grt_status fst = sim_free(s, phys); /* room reserved above */
      assert(fst == GRT_OK);
      (void)fst;
      st = GRT_ERR_NOMEM;
    }
    if (st) {
      unmap_pages(s, r, first, p - first); /* all or nothing */
      return st;
    }
    r->phys[p] = phys;
    r->piece[p] = first;
    r->mapped_pages++;
    s->mapped_pages++;
  }
  return GRT_OK;
}

static grt_status sim_unmap(void *impl, grt_devptr va, uint64_t size) {
  sim *s = impl;
  reservation *r = find_res(s, va);
  if (!r || size > r->va + r->size - va) return GRT_ERR_INVALID_ARG; /* no sum: a size may wrap it */
  uint64_t first = (va - r->va) / PAGE, n = size / PAGE, end = first + n;
  for (uint64_t p = first; p < end; p++)
    if (!r->phys[p]) return GRT_ERR_INVALID_ARG; /* not mapped */
  /* As cuMemUnmap: the range must cover whole mappings, never part of one. */
  if (r->piece[first] != first || (end < r->size / PAGE && r->phys[end] && r->piece[end] == r->piece[end - 1]))
    return GRT_ERR_INVALID_ARG;
  if (!reserve_frees(s, n)) return GRT_ERR_NOMEM;
  unmap_pages(s, r, first, n);
  return GRT_OK;
}

static grt_status sim_release(void *impl, grt_devptr va) {
  sim *s = impl;
  for (size_t i = 0; i < s->n_res; i++) {
    if (s->res[i].va != va) continue;
    if (s->res[i].mapped_pages) return GRT_ERR_BUSY;
    free(s->res[i].phys);
    free(s->res[i].piece);
    memmove(&s->res[i], &s->res[i + 1], (s->n_res - i - 1) * sizeof *s->res);
    s->n_res--;
    return GRT_OK;
  }
  return GRT_ERR_UNKNOWN_POINTER;
}

const grt__device_ops grt__device_sim_ops = {
    .name = "simulated",
    .malloc = sim_malloc,
    .malloc_at = sim_malloc_at,
    .free = sim_free,
    .segment_size = sim_segment_size,
    .host_ptr = sim_host_ptr,
    .memory_stats = sim_memory_stats,
    .bytes_in_use = sim_bytes_in_use,
    .charge_unit = sim_charge_unit,
    .walk = sim_walk,
    .destroy = sim_destroy,
    .vmm_granularity = sim_vmm_granularity,
    .reserve = sim_reserve,
    .map = sim_map,
    .unmap = sim_unmap,
    .release = sim_release,
};
