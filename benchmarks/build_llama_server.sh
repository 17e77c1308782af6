#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` (the server with --parallel slots) for
# benchmarks/model_saturation.py. No network beyond PyPI: the llama.cpp sources come from the
# llama-cpp-python sdist, the release sharpen's `local` extra installs, so the server runs the
# same llama.cpp as the embedded model. CPU only, portable (GGML_NATIVE=OFF: a native build
# dies with "Illegal instruction" on CPUs that advertise AMX), no web UI, no curl.
#   benchmarks/build_llama_server.sh [OUT]    # OUT defaults to /tmp/llama-server; ~15 min on 2 cores
set -euo pipefail
out="${1:-/tmp/llama-server}"
py="${PYTHON:-.venv/bin/python}"
release="$("$py" -c 'from importlib.metadata import version; print(version("llama-cpp-python"))')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$py" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$release"
tar xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
src="$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >/dev/null
cmake --build "$work/build" --target llama-server -j "$(nproc)"
cp "$work/build/bin/llama-server" "$out"
echo "built $out (llama.cpp of llama-cpp-python $release)"
