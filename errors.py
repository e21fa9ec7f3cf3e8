"""The one tree of errors a user can cause; every room imports its errors from here, and the CLI catches the base alone.

Each error's message names the input at fault (file, flag, key, request field) and what to do about
it; the CLI prints it as one line on stderr and exits 2, never a traceback.

    InferProfError                   base of every error a user can cause
    ├── OptionError                  a command-line option with an impossible value
    │   ├── InvalidNativeSelection   --native names no known component
    │   ├── ProfileError             --profile names no known profile
    │   └── NativeUnavailableError   a command needs the C twins and they are not built
    ├── EngineConfigError            engine sizes that cannot work together (pool, batch, budget)
    ├── ModelError                   a model cannot be found, read or used
    │   ├── ModelNotFoundError       unknown name, missing file, failed download
    │   ├── GGUFFormatError          not a GGUF file, truncated, corrupt tensor data
    │   └── UnsupportedModelError    an architecture or tensor type the engine cannot run
    ├── RequestError                 a request the engine refuses (the engine keeps serving others)
    │   ├── InvalidSamplingParams    an impossible sampling parameter (names the parameter)
    │   ├── PromptTooLongError       the prompt does not fit the context or the KV pool
    │   ├── EngineShutdownError      submit() after shutdown()
    │   └── HTTPRequestError         an HTTP request `infer-prof serve` refuses (OpenAI error JSON, 4xx/503)
    ├── ScenarioError                a scenario name or file that cannot be used
    ├── TargetError                  a --target server that cannot be reached or does not speak the OpenAI API
    ├── SweepError                   a sweep file, or a sweep directory that cannot be run, resumed or read
    ├── BudgetError                  a budget file, or a budget check that cannot be evaluated
    ├── ResultError                  a run directory that is missing, incomplete or of another schema
    └── ReportError                  a run directory's files cannot be turned into a report
        └── CompareError             the runs given to compare cannot be compared

It lives outside every room (engine, native_paths, scenarios, profiler, reports) because each of
them raises these and none of them may import all the others.
"""

from __future__ import annotations


class InferProfError(Exception):
    """Base of every error a user can cause; the CLI prints its message on one line and exits 2."""

    exit_code = 2


class OptionError(InferProfError):
    """A command-line option with an impossible value."""


class InvalidNativeSelection(OptionError, ValueError):
    """A `--native` value that names no known component; the message lists the allowed values."""


class ProfileError(OptionError):
    """A `--profile` value that names no known profile."""


class NativeUnavailableError(OptionError, ImportError):
    """The C twins are not built (or failed to load); the message says why and how to build them."""


class EngineConfigError(InferProfError):
    """Engine sizes that cannot work together; the message names the option and its allowed range."""


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


class HTTPRequestError(RequestError):
    """An HTTP request the OpenAI-compatible server refuses before it reaches the engine.

    `status` is the HTTP status (400 bad value, 404 unknown model, 413 body too large, 422 wrong type or
    shape, 503 queue full or shutting down); `param` names the field at fault, `code` is OpenAI's.
    """

    def __init__(
        self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code
        self.retry_after_s = retry_after_s


class TargetError(InferProfError):
    """A `run --target` server that cannot be reached, or answers in something other than the OpenAI API."""


class ScenarioError(InferProfError):
    """A scenario that cannot be used; the one-line message names the file, the key and the allowed values."""


class SweepError(InferProfError):
    """A sweep file (axis, value, key) or a sweep directory that cannot be used; the message names it and the fix."""


class BudgetError(InferProfError):
    """A budget file or a budget check that cannot be evaluated."""


class ResultError(InferProfError):
    """A run directory that is missing, incomplete or of an unknown schema version."""


class ReportError(InferProfError):
    """A run directory's files cannot be turned into a report (the message names the file and the fix)."""


class CompareError(ReportError):
    """The runs given to compare cannot be compared (none on a side, no shared metric)."""
