#!/usr/bin/env bash
# Installs what is missing, builds, and runs the test suite. Tests labelled
# "gpu" run where a GPU is present and are reported as skipped elsewhere.
# Then builds the host code again with AddressSanitizer + UBSan and runs the
# CPU tests there (skip with ANVIL_NO_SANITIZE=1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
if [ -z "${ANVIL_NO_SANITIZE:-}" ]; then
  ANVIL_BUILD_DIR=build-asan ANVIL_CMAKE_ARGS="-DANVIL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" \
    scripts/setup.sh
  ASAN_OPTIONS=detect_leaks=1:protect_shadow_gap=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE "gpu|nvcc|bundle" \
      -E llama_server_test
fi
