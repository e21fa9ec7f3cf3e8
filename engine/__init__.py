"""The built-in inference engine: a paged-KV Llama with continuous batching, profiler-agnostic."""

from .threads import wait_policy_decision

# First thing, before any engine module imports torch: libgomp reads its wait policy only when it loads.
wait_policy_decision()
