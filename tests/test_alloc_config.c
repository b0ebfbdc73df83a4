/* test_alloc_config.c — PYTORCH_CUDA_ALLOC_CONF strings: real ones accepted
 * in PyTorch's syntax, every key's effect, every message, the notes, the
 * environment's precedence, and a failed parse changing nothing. */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"

static grt_alloc_config defaults(void) {
  grt_alloc_config c;
  grt_alloc_config_default(&c);
  return c;
}

/* Parses text over the defaults; fails the test unless it is accepted. */
static grt_alloc_config parsed(const char *text) {
  grt_alloc_config c = defaults();
  char err[256] = "";
  grt_status st = grt_alloc_config_parse(&c, text, err, sizeof err);
  if (st) fail_msg("'%s': %s (%s)", text, grt_status_name(st), err);
  return c;
}

/* The notes text gives over the defaults (it must be accepted). */
static void expect_notes(const char *text, const char *want) {
  grt_alloc_config c = defaults();
  char err[256] = "", notes[GRT_ALLOC_CONFIG_NOTES_SIZE];
  grt_status st = grt_alloc_config_parse_notes(&c, text, err, sizeof err, notes, sizeof notes);
  if (st) fail_msg("'%s': %s (%s)", text, grt_status_name(st), err);
  assert_string_equal(notes, want);
}

/* text fails with status st and exactly msg; the configuration and the notes
 * are as before; without buffers it fails the same. */
static void expect_error(const char *text, grt_status st, const char *msg) {
  grt_alloc_config c = defaults();
  c.memory_fraction = 0.25; /* not a default: the copy-back must not happen */
  grt_alloc_config before = c;
  char err[256] = "", notes[64] = "stale";
  grt_status got = grt_alloc_config_parse_notes(&c, text, err, sizeof err, notes, sizeof notes);
  if (got != st) fail_msg("'%s': %s, want %s (%s)", text, grt_status_name(got), grt_status_name(st), err);
  assert_string_equal(err, msg);
  assert_string_equal(notes, "");
  assert_memory_equal(&c, &before, sizeof c);
  assert_int_equal(grt_alloc_config_parse(&c, text, NULL, 0), st);
  assert_memory_equal(&c, &before, sizeof c);
}

#define GC_NOTE                                                                                     \
  "garbage_collection_threshold: no effect without a memory fraction: PyTorch collects only while " \
  "per_process_memory_fraction (or torch.cuda.set_per_process_memory_fraction) is below 1\n"

/* Strings from PyTorch's documentation, its source and users' scripts. */
static void test_real_strings_accepted(void **state) {
  (void)state;
  static const char *const real[] = {
      "expandable_segments:True",
      "expandable_segments:False",
      "max_split_size_mb:128,garbage_collection_threshold:0.6",
      "garbage_collection_threshold:0.6,max_split_size_mb:128",
      "max_split_size_mb:512",
      "roundup_power2_divisions:4",
      "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
      "roundup_power2_divisions:[64:8,256:4,1024:4,>:1]",
      ("max_split_size_mb:100,max_non_split_rounding_mb:20,garbage_collection_threshold:0.5,"
       "roundup_power2_divisions:[64:8,256:4,1024:4,>:1],expandable_segments:True,pinned_use_background_threads:True"),
      "max_split_size_mb:32,roundup_power2_divisions:4,roundup_bypass_threshold_mb:64,garbage_collection_threshold:0.8",
      "backend:native",
      "pinned_use_cuda_host_register:True,pinned_num_register_threads:8",
      "expandable_segments:True,pinned_max_round_threshold_mb:1,pinned_max_cached_size_mb:1",
      "pinned_max_cached_size_mb:0,pinned_use_background_threads:True",
      "expandable_segments:True,graph_capture_record_stream_reuse:True",
      "expandable_segments:True,large_segment_size_mb:20",
      "per_process_memory_fraction:0.9,garbage_collection_threshold:0.8",
      "release_lock_on_cudamalloc:True",
      "release_lock_on_hipmalloc:False,pinned_use_hip_host_register:True",
      "pinned_reserve_segment_size_mb:1024,pinned_free_catch_all:True,throw_on_cudamalloc_oom:True",
      " max_split_size_mb : 64 ,\texpandable_segments : True ",
      "max_split_size_mb:64,", /* PyTorch takes a trailing comma */
      "",
      "   ",
  };
  for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) (void)parsed(real[i]);
}

static void test_size_keys(void **state) {
  (void)state;
  grt_alloc_config c = parsed("max_split_size_mb:128");
  assert_int_equal(c.max_split_size, 128 * MiB);
  assert_int_equal(parsed("max_split_size_mb:21").max_split_size, 21 * MiB);
  assert_true(parsed("max_split_size_mb:99999999999999999").max_split_size == GRT_UNLIMITED);
  assert_int_equal(defaults().max_non_split_rounding, 20 * MiB);
  assert_int_equal(parsed("max_non_split_rounding_mb:20").max_non_split_rounding, 20 * MiB);
  assert_int_equal(parsed("max_non_split_rounding_mb:64").max_non_split_rounding, 64 * MiB);
  assert_true(defaults().roundup_bypass_threshold == GRT_UNLIMITED);
  assert_int_equal(parsed("roundup_bypass_threshold_mb:64").roundup_bypass_threshold, 64 * MiB);
  assert_int_equal(parsed("roundup_bypass_threshold_mb:0").roundup_bypass_threshold, 0);
  /* a key named twice keeps its last value */
  assert_int_equal(parsed("max_split_size_mb:64,max_split_size_mb:32").max_split_size, 32 * MiB);
}

static void expect_divisions(const char *text, const unsigned want[GRT_ROUNDUP_INTERVALS]) {
  grt_alloc_config c = parsed(text);
  for (int i = 0; i < GRT_ROUNDUP_INTERVALS; i++)
    if (c.roundup_power2_divisions[i] != want[i])
      fail_msg("'%s': entry %d is %u, want %u", text, i, c.roundup_power2_divisions[i], want[i]);
}

/* Entry i covers [2^i, 2^(i+1)) MB; "M:d" sets M's interval (the first one
 * also all below), ">:d" the intervals after the last one listed. */
static void test_divisions(void **state) {
  (void)state;
  static const unsigned docs[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8};
  expect_divisions("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", docs);
  static const unsigned header[] = {8, 8, 8, 8, 8, 8, 8, 0, 4, 0, 4, 1, 1, 1, 1, 1};
  expect_divisions("roundup_power2_divisions:[64:8,256:4,1024:4,>:1]", header);
  static const unsigned four[] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
  expect_divisions("roundup_power2_divisions:4", four);
  static const unsigned rest[] = {8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
  expect_divisions("roundup_power2_divisions:[>:8]", rest);
  static const unsigned clamp[] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8};
  expect_divisions("roundup_power2_divisions:[1:2,1048576:8]", clamp); /* 1 TiB clamps to the last */
  static const unsigned off[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  expect_divisions("roundup_power2_divisions:[256:0,>:0]", off);
  expect_divisions("roundup_power2_divisions:[]", off);
  static const unsigned trailing[] = {2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0};
  expect_divisions("roundup_power2_divisions:[ 256 : 2 , ]", trailing);
}

/* roundup_bypass_threshold_mb: sizes above it ignore the divisions. */
static void test_bypass_rounding(void **state) {
  (void)state;
  grt_alloc_config c = parsed("roundup_power2_divisions:4,roundup_bypass_threshold_mb:4");
  assert_int_equal(grt_alloc_round_size(&c, 3 * MiB + 1), 3 * MiB + MiB / 2); /* quarters of [2, 4) MiB */
  assert_int_equal(grt_alloc_round_size(&c, 4 * MiB), 4 * MiB);
  assert_int_equal(grt_alloc_round_size(&c, 5 * MiB + 1), 5 * MiB + 512); /* above 4 MiB: 512-byte steps */
  c = parsed("roundup_power2_divisions:4");
  assert_int_equal(grt_alloc_round_size(&c, 5 * MiB + 1), 6 * MiB);
}

/* max_non_split_rounding_mb: how much larger a cached block an oversize
 * request may take whole (PyTorch's get_free_block). */
static void test_non_split_rounding_decides(void **state) {
  (void)state;
  const char *confs[] = {"max_split_size_mb:40", "max_split_size_mb:40,max_non_split_rounding_mb:30"};
  for (int i = 0; i < 2; i++) {
    grt_alloc_config c = parsed(confs[i]);
    fixture fx = make_fixture("caching", 256 * MiB, &c);
    grt_devptr big = must_malloc(fx.a, 70 * MiB, 0);
    assert_int_equal(grt_alloc_free(fx.a, big), GRT_OK);
    grt_devptr p = must_malloc(fx.a, 45 * MiB, 0); /* 25 MiB smaller than the cached block */
    grt_alloc_stats s = stats_of(fx.a);
    assert_int_equal(s.num_device_alloc, i == 0 ? 2 : 1);
    if (i == 1) assert_int_equal(p, big);
    assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
    drop_fixture(&fx);
  }
}

static void test_other_keys(void **state) {
  (void)state;
  assert_int_equal(parsed("expandable_segments:True").expandable_segments, 1);
  assert_int_equal(parsed("expandable_segments:True,expandable_segments:False").expandable_segments, 0);
  grt_alloc_config c = parsed("garbage_collection_threshold:0.6");
  assert_true(c.garbage_collection_threshold == 0.6);
  assert_true(parsed("per_process_memory_fraction:0.5").memory_fraction == 0.5);
  assert_true(parsed("per_process_memory_fraction:1").memory_fraction == 0.0); /* PyTorch: no limit */
  assert_true(parsed("per_process_memory_fraction:1e-1").memory_fraction == 0.1);
  /* keys with no effect on the model leave the configuration as it was */
  static const char *const inert[] = {
      "backend:native",
      "release_lock_on_cudamalloc:True",
      "pinned_use_cuda_host_register:True",
      "pinned_num_register_threads:128",
      "pinned_use_background_threads:True",
      "pinned_reserve_segment_size_mb:1",
      "pinned_max_round_threshold_mb:0",
      "pinned_max_cached_size_mb:512",
      "pinned_free_catch_all:False",
      "graph_capture_record_stream_reuse:True",
      "throw_on_cudamalloc_oom:True",
      "large_segment_size_mb:20",
  };
  grt_alloc_config d = defaults();
  for (size_t i = 0; i < sizeof inert / sizeof inert[0]; i++) {
    c = parsed(inert[i]);
    if (memcmp(&c, &d, sizeof c)) fail_msg("'%s' changed the configuration", inert[i]);
  }
  /* gpurt's own keys */
  c = parsed("cross_stream:with_event,fit:first,merge_on_free:false,empty_cache_idle_cycles:3,shards:4");
  assert_int_equal(c.cross_stream, GRT_CROSS_STREAM_WITH_EVENT);
  assert_int_equal(c.fit, GRT_FIT_FIRST);
  assert_int_equal(c.no_merge_on_free, 1);
  assert_int_equal(c.empty_cache_idle_cycles, 3);
  assert_int_equal(c.shards, 4);
}

/* A configuration with every key still makes an allocator. */
static void test_every_key_creates(void **state) {
  (void)state;
  grt_alloc_config c =
      parsed("max_split_size_mb:64,max_non_split_rounding_mb:32,garbage_collection_threshold:0.7,"
             "roundup_power2_divisions:[1:2,>:4],roundup_bypass_threshold_mb:512,expandable_segments:False,"
             "per_process_memory_fraction:0.75,large_segment_size_mb:20,backend:native,release_lock_on_cudamalloc:True,"
             "release_lock_on_hipmalloc:True,graph_capture_record_stream_reuse:True,throw_on_cudamalloc_oom:False,"
             "pinned_use_cuda_host_register:True,pinned_use_hip_host_register:True,pinned_num_register_threads:4,"
             "pinned_use_background_threads:True,pinned_reserve_segment_size_mb:8,pinned_max_round_threshold_mb:4,"
             "pinned_max_cached_size_mb:64,pinned_free_catch_all:True,cross_stream:never,fit:best,merge_on_free:True,"
             "empty_cache_idle_cycles:0,shards:2");
  assert_true(c.memory_fraction == 0.75);
  fixture fx = make_fixture("caching", 256 * MiB, &c);
  grt_devptr p = must_malloc(fx.a, 3 * MiB, 0);
  assert_int_equal(grt_alloc_free(fx.a, p), GRT_OK);
  drop_fixture(&fx);
}

static void test_syntax_errors(void **state) {
  (void)state;
  expect_error(":1", GRT_ERR_PARSE, "expected a key, found ':'");
  expect_error(",max_split_size_mb:64", GRT_ERR_PARSE, "expected a key, found ','");
  expect_error("max_split_size_mb:64,,", GRT_ERR_PARSE, "expected a key, found ','");
  expect_error("[", GRT_ERR_PARSE, "expected a key, found '['");
  expect_error("max_split_size_mb", GRT_ERR_PARSE, "expected ':' after 'max_split_size_mb'");
  expect_error("max_split_size_mb,64", GRT_ERR_PARSE, "expected ':' after 'max_split_size_mb'");
  expect_error("max_split_size_mb:", GRT_ERR_PARSE, "missing value for 'max_split_size_mb'");
  expect_error("max_split_size_mb:,expandable_segments:True", GRT_ERR_PARSE, "missing value for 'max_split_size_mb'");
  expect_error("max_split_size_mb:[64]", GRT_ERR_PARSE, "'max_split_size_mb' takes one value, not a list");
  expect_error("expandable_segments:True:False", GRT_ERR_PARSE,
               "expected ',' after the value of 'expandable_segments', found ':'");
  expect_error("roundup_power2_divisions:[1:2]x", GRT_ERR_PARSE,
               "expected ',' after the value of 'roundup_power2_divisions', found 'x'");
  /* whitespace is dropped, not a separator, as in PyTorch's tokenizer */
  expect_error("max_split_size_mb:64 expandable_segments:True", GRT_ERR_PARSE,
               "max_split_size_mb: '64expandable_segments' is not a number of MB");
  expect_error("max_split_size_mb:64;expandable_segments:True", GRT_ERR_PARSE,
               "max_split_size_mb: '64;expandable_segments' is not a number of MB");
  char longer[200];
  memset(longer, 'k', sizeof longer - 1);
  longer[sizeof longer - 1] = 0;
  expect_error(longer, GRT_ERR_PARSE, "'kkkkkkkkkkkkkkkkkkkk...' is longer than 127 characters");
}

static void test_unknown_keys(void **state) {
  (void)state;
  expect_error("max_split_sizemb:128", GRT_ERR_PARSE, "unknown key 'max_split_sizemb'");
  expect_error("Max_Split_Size_MB:128", GRT_ERR_PARSE, "unknown key 'Max_Split_Size_MB'"); /* case-sensitive */
  expect_error("expandable_segments:True,bogus:1", GRT_ERR_PARSE, "unknown key 'bogus'");
  expect_error("garbage_collect_threshold:0.5", GRT_ERR_PARSE, "unknown key 'garbage_collect_threshold'");
  expect_error("expandable_segments_reserve:0.5", GRT_ERR_PARSE, "unknown key 'expandable_segments_reserve'");
}

static void test_size_errors(void **state) {
  (void)state;
  expect_error("max_split_size_mb:12x", GRT_ERR_PARSE, "max_split_size_mb: '12x' is not a number of MB");
  expect_error("max_split_size_mb:-1", GRT_ERR_PARSE, "max_split_size_mb: '-1' is not a number of MB");
  expect_error("max_split_size_mb:99999999999999999999", GRT_ERR_PARSE,
               "max_split_size_mb: '99999999999999999999' is out of range");
  expect_error("max_split_size_mb:20", GRT_ERR_PARSE, "max_split_size_mb: 20 MB is too small, must be > 20");
  expect_error("max_non_split_rounding_mb:19", GRT_ERR_PARSE,
               "max_non_split_rounding_mb: 19 MB is too small, must be >= 20");
  expect_error("max_non_split_rounding_mb:2.5", GRT_ERR_PARSE,
               "max_non_split_rounding_mb: '2.5' is not a number of MB");
  expect_error("roundup_bypass_threshold_mb:x", GRT_ERR_PARSE,
               "roundup_bypass_threshold_mb: 'x' is not a number of MB");
  expect_error("large_segment_size_mb:10", GRT_ERR_PARSE, "large_segment_size_mb: 10 MB is too small, must be > 10");
  expect_error("pinned_reserve_segment_size_mb:0", GRT_ERR_PARSE,
               "pinned_reserve_segment_size_mb: 0 MB is too small, must be > 0");
  expect_error("pinned_max_cached_size_mb:lots", GRT_ERR_PARSE,
               "pinned_max_cached_size_mb: 'lots' is not a number of MB");
}

static void test_fraction_errors(void **state) {
  (void)state;
  expect_error("garbage_collection_threshold:1.5", GRT_ERR_PARSE, "garbage_collection_threshold: 1.5 is not in (0, 1)");
  expect_error("garbage_collection_threshold:0", GRT_ERR_PARSE, "garbage_collection_threshold: 0 is not in (0, 1)");
  expect_error("garbage_collection_threshold:1", GRT_ERR_PARSE, "garbage_collection_threshold: 1 is not in (0, 1)");
  expect_error("garbage_collection_threshold:nan", GRT_ERR_PARSE, "garbage_collection_threshold: nan is not in (0, 1)");
  expect_error("garbage_collection_threshold:0.5x", GRT_ERR_PARSE,
               "garbage_collection_threshold: '0.5x' is not a number");
  expect_error("per_process_memory_fraction:1.5", GRT_ERR_PARSE, "per_process_memory_fraction: 1.5 is not in [0, 1]");
  expect_error("per_process_memory_fraction:-0.5", GRT_ERR_PARSE, "per_process_memory_fraction: -0.5 is not in [0, 1]");
  expect_error("per_process_memory_fraction:half", GRT_ERR_PARSE,
               "per_process_memory_fraction: 'half' is not a number");
}

static void test_divisions_errors(void **state) {
  (void)state;
  expect_error("roundup_power2_divisions:3", GRT_ERR_PARSE, "roundup_power2_divisions: 3 is not a power of two");
  expect_error("roundup_power2_divisions:0", GRT_ERR_PARSE,
               "roundup_power2_divisions: 0 is not a power of two (0 is taken only inside a [MB:divisions] list)");
  expect_error("roundup_power2_divisions:x", GRT_ERR_PARSE, "roundup_power2_divisions: 'x' is not a number");
  expect_error("roundup_power2_divisions:", GRT_ERR_PARSE, "missing value for 'roundup_power2_divisions'");
  expect_error("roundup_power2_divisions:4294967296", GRT_ERR_PARSE,
               "roundup_power2_divisions: 4294967296 is more than 2147483648");
  expect_error("roundup_power2_divisions:[1:2", GRT_ERR_PARSE, "roundup_power2_divisions: missing ']'");
  expect_error("roundup_power2_divisions:[1:2,", GRT_ERR_PARSE, "roundup_power2_divisions: missing ']'");
  expect_error("roundup_power2_divisions:[1:3]", GRT_ERR_PARSE,
               "roundup_power2_divisions: 3 for '1' is not 0 or a power of two");
  expect_error("roundup_power2_divisions:[>:6]", GRT_ERR_PARSE,
               "roundup_power2_divisions: 6 for '>' is not 0 or a power of two");
  expect_error("roundup_power2_divisions:[1:4294967296]", GRT_ERR_PARSE,
               "roundup_power2_divisions: 4294967296 for '1' is more than 2147483648");
  expect_error("roundup_power2_divisions:[3:2]", GRT_ERR_PARSE,
               "roundup_power2_divisions: interval 3 MB is not a power of two");
  expect_error("roundup_power2_divisions:[0:2]", GRT_ERR_PARSE,
               "roundup_power2_divisions: interval 0 MB is not a power of two");
  expect_error("roundup_power2_divisions:[x:2]", GRT_ERR_PARSE, "roundup_power2_divisions: 'x' is not a number of MB");
  expect_error("roundup_power2_divisions:[1]", GRT_ERR_PARSE, "roundup_power2_divisions: expected ':' after '1'");
  expect_error("roundup_power2_divisions:[1:]", GRT_ERR_PARSE, "roundup_power2_divisions: missing divisions for '1'");
  expect_error("roundup_power2_divisions:[1:x]", GRT_ERR_PARSE, "roundup_power2_divisions: 'x' is not a number");
  expect_error("roundup_power2_divisions:[1:2;2:4]", GRT_ERR_PARSE, "roundup_power2_divisions: '2;2' is not a number");
  expect_error("roundup_power2_divisions:[1:2:4]", GRT_ERR_PARSE,
               "roundup_power2_divisions: expected ',' or ']', found ':'");
  expect_error("roundup_power2_divisions:[,]", GRT_ERR_PARSE,
               "roundup_power2_divisions: expected MB:divisions, found ','");
}

static void test_choice_errors(void **state) {
  (void)state;
  expect_error("expandable_segments:true", GRT_ERR_PARSE, "expandable_segments: 'true' is not True or False");
  expect_error("expandable_segments:1", GRT_ERR_PARSE, "expandable_segments: '1' is not True or False");
  expect_error("release_lock_on_cudamalloc:yes", GRT_ERR_PARSE,
               "release_lock_on_cudamalloc: 'yes' is not True or False");
  expect_error("pinned_use_background_threads:TRUE", GRT_ERR_PARSE,
               "pinned_use_background_threads: 'TRUE' is not True or False");
  expect_error("backend:foo", GRT_ERR_PARSE, "backend: 'foo' is not native, cudaMallocAsync or hipMallocAsync");
  expect_error("backend:Native", GRT_ERR_PARSE, "backend: 'Native' is not native, cudaMallocAsync or hipMallocAsync");
  expect_error("pinned_num_register_threads:3", GRT_ERR_PARSE, "pinned_num_register_threads: 3 is not a power of two");
  expect_error("pinned_num_register_threads:0", GRT_ERR_PARSE, "pinned_num_register_threads: 0 is not a power of two");
  expect_error("pinned_num_register_threads:256", GRT_ERR_PARSE, "pinned_num_register_threads: 256 is more than 128");
  expect_error("pinned_num_register_threads:eight", GRT_ERR_PARSE,
               "pinned_num_register_threads: 'eight' is not a number");
  expect_error("cross_stream:sometimes", GRT_ERR_PARSE, "cross_stream: 'sometimes' is not never/with_event");
  expect_error("fit:worst", GRT_ERR_PARSE, "fit: 'worst' is not best/first");
  expect_error("merge_on_free:2", GRT_ERR_PARSE, "merge_on_free: '2' is not True/False");
  expect_error("empty_cache_idle_cycles:-1", GRT_ERR_PARSE, "empty_cache_idle_cycles: '-1' is not a count");
  expect_error("shards:65", GRT_ERR_PARSE, "shards: '65' is not a count in 1..64");
}

/* Values PyTorch takes whose effect the model lacks: refused, never ignored. */
static void test_unsupported_values(void **state) {
  (void)state;
  expect_error("backend:cudaMallocAsync", GRT_ERR_UNSUPPORTED,
               "backend: cudaMallocAsync runs without the caching allocator; model it with policy 'async' and leave "
               "this key out");
  expect_error("expandable_segments:True,backend:hipMallocAsync", GRT_ERR_UNSUPPORTED,
               "backend: hipMallocAsync runs without the caching allocator; model it with policy 'async' and leave "
               "this key out");
  expect_error("per_process_memory_fraction:0", GRT_ERR_UNSUPPORTED,
               "per_process_memory_fraction: 0 lets no allocation succeed, which the model does not reproduce; use "
               "(0, 1]");
  expect_error("expandable_segments:True,large_segment_size_mb:12", GRT_ERR_UNSUPPORTED,
               "large_segment_size_mb: 12 MB is not modelled: the model's large segments are 20 MiB (PyTorch's "
               "default)");
}

static void test_notes(void **state) {
  (void)state;
  expect_notes("expandable_segments:True,max_split_size_mb:64", "");
  expect_notes("pinned_use_cuda_host_register:True,pinned_num_register_threads:8",
               "pinned_use_cuda_host_register: accepted, no effect on device allocations (pinned host memory)\n"
               "pinned_num_register_threads: accepted, no effect on device allocations (pinned host memory)\n");
  expect_notes("max_split_size_mb:128,garbage_collection_threshold:0.6", GC_NOTE);
  expect_notes("garbage_collection_threshold:0.6,per_process_memory_fraction:0.8", "");
  expect_notes("per_process_memory_fraction:1,garbage_collection_threshold:0.6",
               "per_process_memory_fraction: 1 sets no limit (PyTorch's default)\n" GC_NOTE);
  expect_notes("per_process_memory_fraction:1,per_process_memory_fraction:0.5", ""); /* the last value's note */
  expect_notes("pinned_free_catch_all:True,pinned_free_catch_all:False",
               "pinned_free_catch_all: accepted, no effect on device allocations (pinned host memory)\n");
  expect_notes("backend:native", "backend: native is the caching allocator, the model's default\n");
  expect_notes("large_segment_size_mb:20", "large_segment_size_mb: 20 is PyTorch's default, no change\n");
  expect_notes("release_lock_on_cudamalloc:True",
               "release_lock_on_cudamalloc: accepted, no effect on the model's decisions (PyTorch only drops its "
               "lock around cudaMalloc)\n");
  expect_notes("graph_capture_record_stream_reuse:True",
               "graph_capture_record_stream_reuse: accepted, not modelled (it lets blocks freed with record_stream "
               "during a CUDA graph capture be reused; the model treats such frees as outside a capture)\n");
  expect_notes("throw_on_cudamalloc_oom:True",
               "throw_on_cudamalloc_oom: accepted, not modelled (PyTorch raises the OOM before a cudaMalloc it "
               "expects to fail; the model asks its device)\n");
  /* a memory fraction the caller set already: the threshold takes effect */
  grt_alloc_config c = defaults();
  c.memory_fraction = 0.5;
  char notes[GRT_ALLOC_CONFIG_NOTES_SIZE];
  assert_int_equal(grt_alloc_config_parse_notes(&c, "garbage_collection_threshold:0.6", NULL, 0, notes, sizeof notes),
                   GRT_OK);
  assert_string_equal(notes, "");
  assert_true(c.memory_fraction == 0.5);
}

/* Every note at once fits GRT_ALLOC_CONFIG_NOTES_SIZE; a smaller buffer gets
 * the whole lines that fit. */
static void test_notes_buffer(void **state) {
  (void)state;
  const char *all =
      "backend:native,large_segment_size_mb:20,per_process_memory_fraction:1,garbage_collection_threshold:0.5,"
      "release_lock_on_cudamalloc:True,release_lock_on_hipmalloc:True,graph_capture_record_stream_reuse:True,"
      "throw_on_cudamalloc_oom:True,pinned_use_cuda_host_register:True,pinned_use_hip_host_register:True,"
      "pinned_num_register_threads:2,pinned_use_background_threads:True,pinned_reserve_segment_size_mb:2,"
      "pinned_max_round_threshold_mb:2,pinned_max_cached_size_mb:2,pinned_free_catch_all:True";
  grt_alloc_config c = defaults();
  char notes[GRT_ALLOC_CONFIG_NOTES_SIZE];
  assert_int_equal(grt_alloc_config_parse_notes(&c, all, NULL, 0, notes, sizeof notes), GRT_OK);
  int lines = 0;
  for (const char *p = notes; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 16);
  assert_true(strlen(notes) < sizeof notes / 2); /* room to spare */
  char small[70];                                /* the first line (88 bytes) does not fit, the second does */
  c = defaults();
  assert_int_equal(
      grt_alloc_config_parse_notes(&c, "pinned_free_catch_all:True,backend:native", NULL, 0, small, sizeof small),
      GRT_OK);
  assert_string_equal(small, "backend: native is the caching allocator, the model's default\n");
  char one[1] = {'x'};
  assert_int_equal(grt_alloc_config_parse_notes(&c, "backend:native", NULL, 0, one, sizeof one), GRT_OK);
  assert_int_equal(one[0], 0);
  assert_int_equal(grt_alloc_config_parse_notes(&c, "backend:native", NULL, 0, NULL, 0), GRT_OK);
}

static void test_arguments(void **state) {
  (void)state;
  grt_alloc_config c = defaults();
  char notes[8] = "stale", err[32] = "untouched";
  assert_int_equal(grt_alloc_config_parse_notes(NULL, "", err, sizeof err, notes, sizeof notes), GRT_ERR_INVALID_ARG);
  assert_string_equal(notes, "");
  assert_int_equal(grt_alloc_config_parse_notes(&c, NULL, err, sizeof err, NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_config_parse(NULL, "", NULL, 0), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_alloc_config_parse(&c, "expandable_segments:True", err, sizeof err), GRT_OK);
  assert_string_equal(err, "untouched"); /* success leaves err alone */
  assert_int_equal(grt_alloc_config_parse(&c, "bogus:1", err, 8), GRT_ERR_PARSE);
  assert_string_equal(err, "unknown"); /* cut to the buffer */
}

static void clear_env(void) {
  unsetenv("GRT_ALLOC_CONF");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_HIP_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
}

/* GRT_ALLOC_CONF, then PyTorch's variables in its newest order. */
static void test_env_precedence(void **state) {
  (void)state;
  char err[128] = "";
  grt_alloc_config c = defaults(), d = defaults();
  clear_env();
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_OK);
  assert_memory_equal(&c, &d, sizeof c);
  setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:30", 1);
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_OK);
  assert_int_equal(c.max_split_size, 30 * MiB);
  setenv("PYTORCH_HIP_ALLOC_CONF", "max_split_size_mb:40", 1);
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_OK);
  assert_int_equal(c.max_split_size, 40 * MiB);
  setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:50", 1);
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_OK);
  assert_int_equal(c.max_split_size, 50 * MiB);
  setenv("GRT_ALLOC_CONF", "max_split_size_mb:60", 1);
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_OK);
  assert_int_equal(c.max_split_size, 60 * MiB);
  setenv("GRT_ALLOC_CONF", "", 1); /* set, even empty: PyTorch's variables are not read */
  c = defaults();
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_OK);
  assert_memory_equal(&c, &d, sizeof c);
  clear_env();
  setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,max_split_sizemb:128", 1);
  assert_int_equal(grt_alloc_config_from_env(&c, err, sizeof err), GRT_ERR_PARSE);
  assert_string_equal(err, "PYTORCH_CUDA_ALLOC_CONF: unknown key 'max_split_sizemb'");
  assert_memory_equal(&c, &d, sizeof c);
  setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", 1);
  assert_int_equal(grt_alloc_config_from_env(&c, NULL, 0), GRT_ERR_UNSUPPORTED);
  assert_int_equal(grt_alloc_config_from_env(NULL, err, sizeof err), GRT_ERR_INVALID_ARG);
  clear_env();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_strings_accepted),
      cmocka_unit_test(test_size_keys),
      cmocka_unit_test(test_divisions),
      cmocka_unit_test(test_bypass_rounding),
      cmocka_unit_test(test_non_split_rounding_decides),
      cmocka_unit_test(test_other_keys),
      cmocka_unit_test(test_every_key_creates),
      cmocka_unit_test(test_syntax_errors),
      cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_size_errors),
      cmocka_unit_test(test_fraction_errors),
      cmocka_unit_test(test_divisions_errors),
      cmocka_unit_test(test_choice_errors),
      cmocka_unit_test(test_unsupported_values),
      cmocka_unit_test(test_notes),
      cmocka_unit_test(test_notes_buffer),
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_env_precedence),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
