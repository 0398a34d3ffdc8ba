#!/usr/bin/env bash
# Installs what Anvil needs and builds it. Idempotent: when everything is
# already there it only runs an incremental build.
#   scripts/setup.sh            install + build (build/)
#   scripts/setup.sh --deps     the Debian and Python packages only
#   ANVIL_BUILD_DIR=dir ANVIL_CMAKE_ARGS="-DANVIL_SANITIZE=ON" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git python3-pip patchelf
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  libsqlite3-dev libcurl4-openssl-dev libssl-dev libseccomp-dev bubblewrap
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  prometheus-cpp-dev libcpp-httplib-dev libtomlplusplus-dev libxgboost-dev
  chromium python3-html5lib python3-websocket clang
)
CUTLASS_VERSION=4.2.0.0   # nvidia-cutlass wheel: CUTLASS/CuTe headers
# Into the python3 on PATH: PyYAML for deploy_test (the Kubernetes manifests),
# lizard for source_limits_test (its function lengths are the limit's measure).
python3 -c "import yaml" 2>/dev/null || python3 -m pip install -q pyyaml
python3 -c "import lizard" 2>/dev/null || python3 -m pip install -q lizard==1.24.3
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ "${1:-}" != --deps ] || exit 0

if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
  echo "setup: no CUDA toolkit at $CUDA_HOME (set CUDA_HOME); Anvil needs CUDA 12.4 or newer" >&2
  exit 1
fi

# CUPTI ships with the toolkit; a toolkit without it gets PyPI's wheel.
if [ ! -f "$CUDA_HOME/include/cupti.h" ] && [ ! -f "$CUDA_HOME/extras/CUPTI/include/cupti.h" ] \
   && [ ! -f third_party/cupti/include/cupti.h ]; then
  echo "setup: fetching CUPTI from PyPI"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps -d "$tmp" nvidia-cuda-cupti
  mkdir -p third_party/cupti
  python3 -m zipfile -e "$tmp"/nvidia_cuda_cupti*.whl "$tmp/x"
  cp -r "$tmp"/x/nvidia/cu*/cupti/* third_party/cupti/ 2>/dev/null || cp -r "$tmp"/x/nvidia/cuda_cupti/* third_party/cupti/
  rm -rf "$tmp"
fi

# CUTLASS/CuTe headers at a pinned version, into an ignored folder.
if [ "$(cat third_party/cutlass/VERSION 2>/dev/null)" != "$CUTLASS_VERSION" ]; then
  echo "setup: fetching CUTLASS headers (nvidia-cutlass==$CUTLASS_VERSION)"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps -d "$tmp" "nvidia-cutlass==$CUTLASS_VERSION"
  python3 -m zipfile -e "$tmp"/nvidia_cutlass-*.whl "$tmp/x"
  rm -rf third_party/cutlass && mkdir -p third_party/cutlass/tools/util
  cp -r "$tmp/x/cutlass_library/source/include" third_party/cutlass/include
  cp -r "$tmp/x/cutlass_library/source/tools/util/include" third_party/cutlass/tools/util/include
  echo "$CUTLASS_VERSION" > third_party/cutlass/VERSION
  rm -rf "$tmp"
fi

# llama.cpp's llama-server and a small model, for the LLM proposer's test
# against a real server, are not built here: scripts/test.sh builds them in the
# background (scripts/llama_server.sh, once into third_party/llama).

BUILD_DIR=${ANVIL_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" ${ANVIL_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "${ANVIL_JOBS:-$(nproc)}"
