"""The OpenAI-compatible HTTP server over the built-in engine: `infer-prof serve` (app, validation, SSE, metrics, shutdown).

protocol.py   request bodies and their validation into engine SamplingParams; OpenAI's error JSON
responses.py  response bodies and SSE chunks
handoff.py    token deltas and finished outputs from the engine thread to the event loop
metrics.py    Prometheus metrics (prometheus-client)
profiling.py  profile windows: a recording tracer swapped in for `run --target`, read back as JSON
state.py      what the handlers share, and the admission rules (model, queue, shutdown)
app.py        the FastAPI routes
server.py     uvicorn with a graceful shutdown
"""
