#!/usr/bin/env bash
# Installs what is missing, builds, and runs the test suite. Tests labelled
# "gpu" run where a GPU is present and are reported as skipped elsewhere.
# Then builds the host code again with AddressSanitizer + UBSan and runs the
# CPU tests there (skip with ANVIL_NO_SANITIZE=1).
# llama.cpp's llama-server, which only llama_server_test needs, builds in the
# background at the lowest priority from the start (scripts/llama_server.sh:
# it takes the CPU the build and the tests leave idle); that test runs last,
# once the server is there (ANVIL_LLAMA=0: it skips, reporting why).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --deps  # the compilers and CMake that llama-server's build needs too
mkdir -p build
llama_pid=
if [ "${ANVIL_LLAMA:-1}" != 0 ]; then
  # Its own process group (job control), so that an early exit stops all of
  # it; not its own session, where the scheduler's autogroups would undo nice.
  set -m
  nice -n 19 scripts/llama_server.sh > build/llama_server.log 2>&1 &
  llama_pid=$!
  set +m
  trap 'kill -- -"$llama_pid" 2>/dev/null || true' EXIT
fi
scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" -E '^llama_server_test$'
if [ -z "${ANVIL_NO_SANITIZE:-}" ]; then
  ANVIL_BUILD_DIR=build-asan ANVIL_CMAKE_ARGS="-DANVIL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" \
    scripts/setup.sh
  ASAN_OPTIONS=detect_leaks=1:protect_shadow_gap=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE "gpu|nvcc|bundle" \
      -E llama_server_test
fi
if [ -n "$llama_pid" ]; then
  echo "test: waiting for llama-server (scripts/llama_server.sh, build/llama_server.log)"
  wait "$llama_pid" || { cat build/llama_server.log; echo "scripts/llama_server.sh failed" >&2; exit 1; }
  trap - EXIT
fi
ctest --test-dir build --output-on-failure -R '^llama_server_test$'
