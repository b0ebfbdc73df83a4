/* page_impl.h — the snapshot's page (grt_doctor_page_save): HTML
 * (page.c) around its data object (page_data.c), with the script and
 * style of src/doctor/page/ embedded at build time (cmake/embed.cmake). */
#ifndef GRT_DOCTOR_PAGE_IMPL_H
#define GRT_DOCTOR_PAGE_IMPL_H

#include <stddef.h>
#include <stdio.h>

#include "gpurt/doctor.h"
#include "gpurt/replay.h"

typedef struct grt__page_input {
  const grt_trace *trace;
  const char *name;                 /* the snapshot's name, the page's title */
  int device;
  const grt_doctor_report *doctor;
  const grt_replay_sample *samples; /* the faithful replay, one per event */
  size_t n_samples;
} grt__page_input;

/* The page's data object (JSON). */
grt_status grt__page_data(FILE *f, const grt__page_input *x);
/* The whole page. */
grt_status grt__page_write(FILE *f, const grt__page_input *x);

#endif
