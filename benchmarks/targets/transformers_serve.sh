#!/usr/bin/env bash
# `transformers serve` (a pure-Python generation loop) on SmolLM2-135M, from the vLLM venv that
# vllm_cpu.sh makes (it has transformers). It lists only models in the Hugging Face hub cache, so the
# converted folder is copied there as local/smollm2.
# Usage: benchmarks/targets/transformers_serve.sh [VENV_DIR] [PORT]; --print-command for --launch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
print_only=false
if [ "${1:-}" = "--print-command" ]; then print_only=true; shift; fi
venv="${1:-$HOME/.cache/infer-prof/peers/vllm}"
port="${2:-8103}"
command="env HF_HUB_OFFLINE=1 $venv/bin/transformers serve local/smollm2 --host 127.0.0.1 --port $port"
if $print_only; then echo "$command"; exit 0; fi
[ -x "$venv/bin/transformers" ] || { echo "transformers_serve.sh: run vllm_cpu.sh first (it makes $venv)" >&2; exit 2; }
model_dir="$venv/smollm2-hf"
[ -f "$model_dir/model.safetensors" ] || "$venv/bin/python" "$here/convert_smollm2.py" "$model_dir"
cache="${HF_HOME:-$HOME/.cache/huggingface}/hub/models--local--smollm2"
revision=0000000000000000000000000000000000000000
mkdir -p "$cache/refs" "$cache/snapshots/$revision"
printf %s "$revision" > "$cache/refs/main"
cp -n "$model_dir"/* "$cache/snapshots/$revision/"
exec $command
