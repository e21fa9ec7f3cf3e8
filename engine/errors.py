"""The engine's exceptions, each carrying a message a user can act on.

    InferProfError                 base of every error a user can cause
    ├── ModelError                 a model cannot be found, read or used
    │   ├── ModelNotFoundError     unknown name, missing file, failed download
    │   ├── GGUFFormatError        not a GGUF file, truncated, corrupt tensor data
    │   └── UnsupportedModelError  an architecture or tensor type the engine cannot run
    └── RequestError               a request the engine refuses (the engine keeps serving others)
        ├── InvalidSamplingParams  an impossible sampling parameter (names the parameter)
        ├── PromptTooLongError     the prompt does not fit the context or the KV pool
        └── EngineShutdownError    submit() after shutdown()
"""

from __future__ import annotations


class InferProfError(Exception):
    """Base of every error a user can cause; the CLI prints its message on one line and exits 2."""


class ModelError(InferProfError):
    """A model cannot be found, read or used."""


class ModelNotFoundError(ModelError):
    """An unknown model name, a missing file, or a failed download."""


class GGUFFormatError(ModelError):
    """A file that is not GGUF, is truncated, or has corrupt tensor data."""


class UnsupportedModelError(ModelError):
    """An architecture or tensor type the engine cannot run."""


class RequestError(InferProfError):
    """A request the engine refuses; other requests keep being served."""


class InvalidSamplingParams(RequestError):
    """An impossible sampling parameter; the message names it and the allowed range."""


class PromptTooLongError(RequestError):
    """A prompt (plus its max_tokens) that cannot fit the model's context or the KV pool."""


class EngineShutdownError(RequestError):
    """submit() was called after shutdown()."""
