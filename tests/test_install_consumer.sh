#!/usr/bin/env bash
# test_install_consumer.sh — what `cmake --install` promises: libgpurt shared
# and static, the headers, gpurt.pc with the prefix it was installed into,
# the CMake package; a small consumer built against an install into a
# temporary prefix four ways (pkg-config shared and --static, find_package
# gpurt::gpurt and gpurt::gpurt_static), each run.
set -euo pipefail
GPURT=${1:?usage: test_install_consumer.sh PATH/TO/gpurt}
build=$(cd "$(dirname "$GPURT")/.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
if grep -qE '^GRT_SANITIZE:STRING=.+|^CMAKE_C_FLAGS:STRING=.*--coverage' "$build/CMakeCache.txt"; then
  echo "SKIPPED: the install is tested in the plain build (a sanitizer's or coverage's objects need its runtime)"
  exit 77
fi
command -v pkg-config >/dev/null || fail "pkg-config is not installed (scripts/deps.sh installs it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name libgpurt.a -printf '%h\n' | head -1)
[ -n "$libdir" ] || fail "no libgpurt.a installed"
for f in libgpurt.so pkgconfig/gpurt.pc cmake/gpurt/gpurtConfig.cmake cmake/gpurt/gpurtTargets.cmake; do
  [ -e "$libdir/$f" ] || fail "$f not installed"
done
for h in base.h alloc.h device.h trace.h replay.h doctor.h report.h serve.h; do
  [ -f "$prefix/include/gpurt/$h" ] || fail "include/gpurt/$h not installed"
done
[ -x "$prefix/bin/gpurt" ] && [ -x "$prefix/bin/gpurt-conformance" ] || fail "gpurt or gpurt-conformance not installed"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[ "$(realpath "$(pkg-config --variable=prefix gpurt)")" = "$(realpath "$prefix")" ] ||
  fail "gpurt.pc names prefix $(pkg-config --variable=prefix gpurt), not $prefix"
cat >"$tmp/consumer.c" <<'C'
#include <gpurt/alloc.h>
#include <stdio.h>
int main(void) {
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = 64u << 20;
  grt_alloc_config ac;
  grt_alloc_config_default(&ac);
  grt_device *dev = NULL;
  grt_allocator *a = NULL;
  grt_devptr p;
  grt_status st = grt_device_create(&dc, &dev);
  if (!st) st = grt_alloc_create("caching", dev, &ac, &a);
  if (!st) st = grt_alloc_malloc(a, 3 << 20, 0, &p);
  if (!st) st = grt_alloc_free(a, p);
  if (!st) st = grt_alloc_destroy(a);
  if (!st) st = grt_device_destroy(dev);
  printf("%s\n", grt_status_name(st));
  return st != GRT_OK;
}
C
cc -o "$tmp/c_shared" "$tmp/consumer.c" $(pkg-config --cflags --libs gpurt) -Wl,-rpath,"$libdir"
# --static: libgpurt.a, then what it needs (Libs.private); libc stays shared
private=$(pkg-config --static --libs-only-l gpurt)
cc -o "$tmp/c_static" "$tmp/consumer.c" $(pkg-config --cflags --libs-only-L gpurt) -Wl,-Bstatic -lgpurt -Wl,-Bdynamic \
  ${private/-lgpurt/}
for c in c_shared c_static; do
  [ "$("$tmp/$c")" = GRT_OK ] || fail "$c did not run"
done
grep -q libgpurt.so <<<"$(ldd "$tmp/c_shared")" || fail "the pkg-config shared consumer does not use libgpurt.so"
! grep -q libgpurt.so <<<"$(ldd "$tmp/c_static")" || fail "the --static consumer still needs libgpurt.so"
echo "ok: pkg-config, shared and static"
mkdir -p "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(gpurt 0.1 REQUIRED)
add_executable(c_shared ../consumer.c)
target_link_libraries(c_shared PRIVATE gpurt::gpurt)
add_executable(c_static ../consumer.c)
target_link_libraries(c_static PRIVATE gpurt::gpurt_static)
CM
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$tmp/cm" -B "$tmp/cm/build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null
for c in c_shared c_static; do
  [ "$("$tmp/cm/build/$c")" = GRT_OK ] || fail "find_package $c did not run"
done
! grep -q libgpurt.so <<<"$(ldd "$tmp/cm/build/c_static")" || fail "gpurt::gpurt_static still needs libgpurt.so"
echo "ok: find_package(gpurt), gpurt::gpurt and gpurt::gpurt_static"
