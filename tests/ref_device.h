/* ref_device.h — a deliberately simple reference of the simulated device
 * (include/gpurt/device.h), for differential tests against src/device/.
 *
 * The physical space is one list of intervals in address order that tile
 * [base, base + capacity): each free, a segment, or a page mapped into a
 * reservation. Adjacent free intervals are always merged. Every lookup is a
 * linear scan. Rules, from the public header:
 *   - malloc: size 0 or above the capacity is GRT_ERR_SIZE (before anything
 *     else); the size rounds up to the alignment; a pending placement hint is
 *     used if its range is free; else the lowest free interval that fits; a
 *     successful malloc ends the hint, a refused one keeps it;
 *   - an armed fault (inject n) counts down on each malloc, malloc_at and map
 *     that passes validation, and fails the nth;
 *   - free: the start of a live segment; an address freed and not handed out
 *     again as a start is a double free; inside a live interval is interior;
 *     anything else is unknown;
 *   - reservations are address space above the physical range that is never
 *     reused (a guard page after each); map backs pages first fit, one page
 *     at a time, all or nothing; unmap returns them (their addresses count as
 *     freed); release needs a wholly unmapped reservation.
 * Header-only (static functions) so a test file includes it; not thread-safe.
 */
#ifndef GRT_TESTS_REF_DEVICE_H
#define GRT_TESTS_REF_DEVICE_H

#include <stdlib.h>
#include <string.h>

#include "gpurt/device.h"

#define REF_PAGE ((uint64_t)2 << 20)

enum { REF_FREE = 0, REF_SEGMENT, REF_PAGE_MAPPED };

typedef struct ref_interval {
  grt_devptr addr;
  uint64_t size;
  int kind;
} ref_interval;

typedef struct ref_reservation {
  grt_devptr va;
  uint64_t size;
  grt_devptr *phys; /* per page, 0 = unmapped */
  uint64_t *first;  /* per mapped page: the first page of the map call that mapped it */
} ref_reservation;

typedef struct ref_device {
  grt_device_config cfg;
  ref_interval *iv;
  size_t n_iv, cap_iv;
  unsigned char *freed; /* per alignment unit of the physical range: a start freed and not handed out again */
  ref_reservation *res;
  size_t n_res, cap_res;
  grt_devptr next_va, hint;
  uint64_t countdown;
  grt_device_stats st; /* counters kept here; the memory fields are recomputed */
} ref_device;

static void *ref_grow(void *p, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return p;
  *cap = *cap ? 2 * *cap : 16;
  p = realloc(p, *cap * elem);
  if (!p) abort();
  return p;
}

static void ref_dev_init(ref_device *d, const grt_device_config *cfg) {
  memset(d, 0, sizeof *d);
  d->cfg = *cfg;
  d->iv = ref_grow(NULL, &d->cap_iv, 0, sizeof *d->iv);
  d->iv[0] = (ref_interval){cfg->base_address, cfg->capacity, REF_FREE};
  d->n_iv = 1;
  d->freed = calloc(cfg->capacity / cfg->alignment + 1, 1);
  if (!d->freed) abort();
  d->next_va = cfg->base_address + ((uint64_t)1 << 44);
  d->countdown = cfg->fail_malloc_at;
}

static void ref_dev_destroy(ref_device *d) {
  for (size_t i = 0; i < d->n_res; i++) free(d->res[i].phys), free(d->res[i].first);
  free(d->res);
  free(d->iv);
  free(d->freed);
}

static int ref_fault(ref_device *d) {
  if (d->countdown == 0) return 0;
  return --d->countdown == 0;
}

static uint64_t ref_in_use(const ref_device *d) {
  uint64_t n = 0;
  for (size_t i = 0; i < d->n_iv; i++) n += d->iv[i].kind != REF_FREE ? d->iv[i].size : 0;
  return n;
}

static void ref_note_peak(ref_device *d) {
  uint64_t n = ref_in_use(d);
  if (n > d->st.peak_bytes_in_use) d->st.peak_bytes_in_use = n;
}

/* Only interval starts are ever freed, and they lie in the physical range on the alignment. */
static void ref_forget_freed(ref_device *d, grt_devptr addr) {
  d->freed[(addr - d->cfg.base_address) / d->cfg.alignment] = 0;
}

static int ref_was_freed(const ref_device *d, grt_devptr addr) {
  if (addr < d->cfg.base_address || addr >= d->cfg.base_address + d->cfg.capacity) return 0;
  if ((addr - d->cfg.base_address) % d->cfg.alignment) return 0;
  return d->freed[(addr - d->cfg.base_address) / d->cfg.alignment];
}

/* Carves [addr, addr + size) of kind out of free interval i. */
static void ref_take(ref_device *d, size_t i, grt_devptr addr, uint64_t size, int kind) {
  ref_interval h = d->iv[i];
  ref_interval parts[3];
  size_t n = 0;
  if (addr > h.addr) parts[n++] = (ref_interval){h.addr, addr - h.addr, REF_FREE};
  parts[n++] = (ref_interval){addr, size, kind};
  if (addr + size < h.addr + h.size) parts[n++] = (ref_interval){addr + size, h.addr + h.size - addr - size, REF_FREE};
  while (d->n_iv + 2 >= d->cap_iv) d->iv = ref_grow(d->iv, &d->cap_iv, d->n_iv + 2, sizeof *d->iv);
  memmove(&d->iv[i + n], &d->iv[i + 1], (d->n_iv - i - 1) * sizeof *d->iv);
  memcpy(&d->iv[i], parts, n * sizeof *parts);
  d->n_iv += n - 1;
  ref_forget_freed(d, addr);
}

/* Interval i becomes free and merges with free neighbours; its start counts as freed. */
static void ref_give_back(ref_device *d, size_t i) {
  d->freed[(d->iv[i].addr - d->cfg.base_address) / d->cfg.alignment] = 1;
  d->iv[i].kind = REF_FREE;
  if (i + 1 < d->n_iv && d->iv[i + 1].kind == REF_FREE) {
    d->iv[i].size += d->iv[i + 1].size;
    memmove(&d->iv[i + 1], &d->iv[i + 2], (d->n_iv - i - 2) * sizeof *d->iv);
    d->n_iv--;
  }
  if (i > 0 && d->iv[i - 1].kind == REF_FREE) {
    d->iv[i - 1].size += d->iv[i].size;
    memmove(&d->iv[i], &d->iv[i + 1], (d->n_iv - i - 1) * sizeof *d->iv);
    d->n_iv--;
  }
}

/* The interval holding addr, or -1. */
static long ref_interval_at(const ref_device *d, grt_devptr addr) {
  for (size_t i = 0; i < d->n_iv; i++)
    if (addr >= d->iv[i].addr && addr < d->iv[i].addr + d->iv[i].size) return (long)i;
  return -1;
}

static int ref_first_fit(ref_device *d, uint64_t size, int kind, grt_devptr *out) {
  for (size_t i = 0; i < d->n_iv; i++)
    if (d->iv[i].kind == REF_FREE && d->iv[i].size >= size) {
      *out = d->iv[i].addr;
      ref_take(d, i, *out, size, kind);
      return 1;
    }
  return 0;
}

static int ref_place_at(ref_device *d, grt_devptr addr, uint64_t size) {
  long i = ref_interval_at(d, addr);
  if (i < 0 || d->iv[i].kind != REF_FREE || addr + size > d->iv[i].addr + d->iv[i].size || addr + size < addr) return 0;
  ref_take(d, (size_t)i, addr, size, REF_SEGMENT);
  return 1;
}

static uint64_t ref_align(const ref_device *d, uint64_t size) {
  return (size + d->cfg.alignment - 1) / d->cfg.alignment * d->cfg.alignment;
}

static grt_status ref_dev_malloc(ref_device *d, uint64_t size, grt_devptr *out) {
  if (size == 0 || size > d->cfg.capacity) return GRT_ERR_SIZE;
  size = ref_align(d, size);
  grt_devptr hint = d->hint;
  grt_status st = GRT_OK;
  if (ref_fault(d))
    st = GRT_ERR_FAULT_INJECTED;
  else if (hint && ref_place_at(d, hint, size))
    *out = hint;
  else if (!ref_first_fit(d, size, REF_SEGMENT, out))
    st = GRT_ERR_OOM;
  if (st == GRT_OK) {
    d->hint = 0;
    d->st.malloc_calls++;
    ref_note_peak(d);
  } else {
    d->st.failed_mallocs++;
  }
  return st;
}

static grt_status ref_dev_malloc_at(ref_device *d, grt_devptr addr, uint64_t size) {
  if (size == 0 || size > d->cfg.capacity) return GRT_ERR_SIZE;
  if (addr % d->cfg.alignment) return GRT_ERR_INVALID_ARG;
  size = ref_align(d, size);
  grt_status st = GRT_OK;
  if (ref_fault(d))
    st = GRT_ERR_FAULT_INJECTED;
  else if (!ref_place_at(d, addr, size))
    st = GRT_ERR_OOM;
  if (st == GRT_OK) {
    d->st.malloc_calls++;
    ref_note_peak(d);
  } else {
    d->st.failed_mallocs++;
  }
  return st;
}

static grt_status ref_dev_set_next_address(ref_device *d, grt_devptr addr) {
  if (addr % d->cfg.alignment) return GRT_ERR_INVALID_ARG;
  d->hint = addr;
  return GRT_OK;
}

/* Why addr is not the start of a live segment. */
static grt_status ref_dev_classify(const ref_device *d, grt_devptr addr) {
  long i = ref_interval_at(d, addr);
  if (i < 0) return GRT_ERR_UNKNOWN_POINTER;
  if (d->iv[i].kind == REF_PAGE_MAPPED && d->iv[i].addr == addr) return GRT_ERR_UNKNOWN_POINTER; /* not a segment */
  if (d->iv[i].kind != REF_FREE) return GRT_ERR_INTERIOR_POINTER; /* inside live memory, even if once freed */
  return ref_was_freed(d, addr) ? GRT_ERR_DOUBLE_FREE : GRT_ERR_UNKNOWN_POINTER;
}

static grt_status ref_dev_free(ref_device *d, grt_devptr ptr) {
  long i = ref_interval_at(d, ptr);
  if (i < 0 || d->iv[i].kind != REF_SEGMENT || d->iv[i].addr != ptr) return ref_dev_classify(d, ptr);
  ref_give_back(d, (size_t)i);
  d->st.free_calls++;
  d->st.syncs++;
  return GRT_OK;
}

static grt_status ref_dev_segment_size(const ref_device *d, grt_devptr ptr, uint64_t *size) {
  long i = ref_interval_at(d, ptr);
  if (i < 0 || d->iv[i].kind != REF_SEGMENT || d->iv[i].addr != ptr) return ref_dev_classify(d, ptr);
  *size = d->iv[i].size;
  return GRT_OK;
}

static ref_reservation *ref_res_at(ref_device *d, grt_devptr va) {
  for (size_t i = 0; i < d->n_res; i++)
    if (va >= d->res[i].va && va < d->res[i].va + d->res[i].size) return &d->res[i];
  return NULL;
}

/* host_ptr's verdict: GRT_OK when every byte of the range is backed. */
static grt_status ref_dev_host_ptr(ref_device *d, grt_devptr ptr, uint64_t len) {
  if (!d->cfg.host_backing) return GRT_ERR_UNSUPPORTED;
  ref_reservation *r = ref_res_at(d, ptr);
  if (r) {
    uint64_t page = (ptr - r->va) / REF_PAGE, off = (ptr - r->va) % REF_PAGE;
    return r->phys[page] && off + len <= REF_PAGE ? GRT_OK : GRT_ERR_UNKNOWN_POINTER;
  }
  grt_devptr end = d->cfg.base_address + d->cfg.capacity;
  if (ptr < d->cfg.base_address || ptr >= end || len > end - ptr) return GRT_ERR_UNKNOWN_POINTER;
  for (size_t i = 0; i < d->n_iv; i++) { /* no free byte in [ptr, ptr + max(len, 1)) */
    const ref_interval *v = &d->iv[i];
    if (v->kind == REF_FREE && v->addr < ptr + (len ? len : 1) && v->addr + v->size > ptr) return GRT_ERR_UNKNOWN_POINTER;
  }
  return GRT_OK;
}

static grt_status ref_vm_check(grt_devptr va, uint64_t size) {
  if (size == 0) return GRT_ERR_SIZE;
  return size % REF_PAGE || va % REF_PAGE ? GRT_ERR_INVALID_ARG : GRT_OK;
}

static grt_status ref_dev_reserve(ref_device *d, uint64_t size, grt_devptr *va) {
  if (ref_vm_check(0, size)) return ref_vm_check(0, size);
  d->res = ref_grow(d->res, &d->cap_res, d->n_res, sizeof *d->res);
  ref_reservation *r = &d->res[d->n_res++];
  r->va = d->next_va;
  r->size = size;
  r->phys = calloc(size / REF_PAGE, sizeof *r->phys);
  r->first = calloc(size / REF_PAGE, sizeof *r->first);
  if (!r->phys || !r->first) abort();
  *va = r->va;
  d->next_va += size + REF_PAGE;
  return GRT_OK;
}

static void ref_unmap_page(ref_device *d, ref_reservation *r, uint64_t page) {
  ref_give_back(d, (size_t)ref_interval_at(d, r->phys[page]));
  r->phys[page] = 0;
}

static grt_status ref_dev_map(ref_device *d, grt_devptr va, uint64_t size) {
  if (ref_vm_check(va, size)) return ref_vm_check(va, size);
  if (ref_fault(d)) {
    d->st.failed_mallocs++;
    return GRT_ERR_FAULT_INJECTED;
  }
  ref_reservation *r = ref_res_at(d, va);
  if (!r || va + size > r->va + r->size) return GRT_ERR_INVALID_ARG;
  uint64_t first = (va - r->va) / REF_PAGE, n = size / REF_PAGE;
  for (uint64_t p = first; p < first + n; p++)
    if (r->phys[p]) return GRT_ERR_INVALID_ARG;
  for (uint64_t p = first; p < first + n; p++) {
    if (!ref_first_fit(d, REF_PAGE, REF_PAGE_MAPPED, &r->phys[p])) {
      r->phys[p] = 0;
      for (uint64_t q = first; q < p; q++) ref_unmap_page(d, r, q);
      d->st.failed_mallocs++;
      return GRT_ERR_OOM;
    }
    r->first[p] = first;
  }
  d->st.map_calls++;
  ref_note_peak(d);
  return GRT_OK;
}

static grt_status ref_dev_unmap(ref_device *d, grt_devptr va, uint64_t size) {
  if (ref_vm_check(va, size)) return ref_vm_check(va, size);
  ref_reservation *r = ref_res_at(d, va);
  if (!r || va + size > r->va + r->size) return GRT_ERR_INVALID_ARG;
  uint64_t first = (va - r->va) / REF_PAGE, n = size / REF_PAGE, end = first + n;
  for (uint64_t p = first; p < end; p++)
    if (!r->phys[p]) return GRT_ERR_INVALID_ARG;
  /* whole mappings only (cuMemUnmap): the range starts a mapping and the next page is not of the last one's */
  if (r->first[first] != first) return GRT_ERR_INVALID_ARG;
  if (end < r->size / REF_PAGE && r->phys[end] && r->first[end] == r->first[end - 1]) return GRT_ERR_INVALID_ARG;
  for (uint64_t p = first; p < first + n; p++) ref_unmap_page(d, r, p);
  d->st.unmap_calls++;
  d->st.syncs++;
  return GRT_OK;
}

static grt_status ref_dev_release(ref_device *d, grt_devptr va) {
  for (size_t i = 0; i < d->n_res; i++) {
    if (d->res[i].va != va) continue;
    for (uint64_t p = 0; p < d->res[i].size / REF_PAGE; p++)
      if (d->res[i].phys[p]) return GRT_ERR_BUSY;
    free(d->res[i].phys);
    free(d->res[i].first);
    memmove(&d->res[i], &d->res[i + 1], (d->n_res - i - 1) * sizeof *d->res);
    d->n_res--;
    return GRT_OK;
  }
  return GRT_ERR_UNKNOWN_POINTER;
}

static grt_device_stats ref_dev_stats(const ref_device *d) {
  grt_device_stats s = d->st;
  s.capacity = d->cfg.capacity;
  s.bytes_in_use = ref_in_use(d);
  s.free_bytes = s.capacity - s.bytes_in_use;
  s.largest_hole = s.holes = s.segments = s.mapped_bytes = s.reserved_va_bytes = 0;
  for (size_t i = 0; i < d->n_iv; i++) {
    const ref_interval *v = &d->iv[i];
    if (v->kind == REF_FREE) {
      s.holes++;
      if (v->size > s.largest_hole) s.largest_hole = v->size;
    }
    s.segments += v->kind == REF_SEGMENT;
    s.mapped_bytes += v->kind == REF_PAGE_MAPPED ? v->size : 0;
  }
  for (size_t i = 0; i < d->n_res; i++) s.reserved_va_bytes += d->res[i].size;
  return s;
}

#endif
