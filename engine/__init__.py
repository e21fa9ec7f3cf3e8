"""The built-in inference engine: a paged-KV Llama with continuous batching, profiler-agnostic."""
