"""The time split's category and component names, written once for the result, the verdict and the engine tables.

It imports nothing, so the engine tables and the instant CLI read the names without loading pandas
(docs/architecture.md, "One name per component").
"""

from __future__ import annotations

# `waiting` is a client or load-generator thread waiting for the engine (its next token): not contention.
CATEGORIES = ("interpreter", "lock", "allocation", "kernel", "idle", "waiting", "other")
# The control paths a C twin can take over (native_paths; `core` fuses three of them), in the run's words' order.
NATIVE_CAPABLE = ("scheduler", "sampler", "kv_alloc", "prepare")
# The per-token control flow: what a twin replaces, and the tokenizer's two ends, which no twin does.
CONTROL_PATHS = (*NATIVE_CAPABLE, "tokenizer", "detokenizer")
COMPONENTS = (*CONTROL_PATHS, "model_glue", "model_kernels", "d2h", "queue", "api")
