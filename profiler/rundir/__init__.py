"""The run-directory contract: the result schema, atomic writes, the environment and the samples reports read; imports nothing else of profiler."""
