#!/usr/bin/env bash
# infer-prof's C sampler inside vLLM's CPU build (docs/serving.md, --swap sampler): the server of vllm_cpu.sh,
# launched with the probe and the swap, under a scenario (default chat, 48 requests). Also:
#   python benchmarks/bench_vllm_sampler_swap.py --llm ~/.cache/infer-prof/peers/vllm/smollm2-hf
# for the draws' distribution against vLLM's own, and greedy / seeded tokens with the swap switched out and in.
# Usage: benchmarks/targets/vllm_cpu_swap.sh [SCENARIO] [REQUESTS] [OUT] [EXTRA...]
#   e.g. ... chat 192 runs/swap --what-if sampler   (the slowdown's prediction beside the swap's measured gain)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scenario="${1:-chat}"
requests="${2:-48}"
out="${3:-}"
shift $(( $# < 3 ? $# : 3 ))
exec infer-prof run --launch "$("$here/vllm_cpu.sh" --print-command)" --probe --swap sampler \
  -s "$scenario" -r "$requests" ${out:+--out "$out"} "$@"
