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
    ├── LedgerError                  a prediction ledger that is missing, unreadable or cannot be appended to
    ├── ReportError                  a run directory's files cannot be turned into a report
    │   └── CompareError             the runs given to compare cannot be compared
    └── OutputError                  an output path the system will not let us write (full, read-only, ...)

It lives outside every room (engine, native_paths, scenarios, profiler, reports) because each of
them raises these and none of them may import all the others. For the same reason it holds the one
size and nesting limit for every file infer-prof parses (read_bounded, check_nesting), the one reader
of each kind of document (read_toml, parse_json), and the one
translation of an OS error on an output path (output_error).
"""

from __future__ import annotations

import errno
import os
import re
from itertools import accumulate


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
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
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


class LedgerError(InferProfError):
    """A prediction ledger (profiler.ledger) that is missing, holds no record, or cannot be appended to."""


class ResultError(InferProfError):
    """A run directory that is missing, incomplete or of an unknown schema version."""


class ReportError(InferProfError):
    """A run directory's files cannot be turned into a report (the message names the file and the fix)."""


class CompareError(ReportError):
    """The runs given to compare cannot be compared (none on a side, no shared metric)."""


class OutputError(InferProfError):
    """An output path the system refuses (disk full, read-only, name too long, no permission); names it and why."""


# -- the limits on what infer-prof parses ------------------------------------------------------
# A hand-written file (scenario, sweep, budget TOML) is a few KiB; a run's result.json and tables grow
# with its length (a 1,500-request run's steps.csv is a few MiB). Past these a file is not ours or is
# damaged, and parsing it would stall (tomllib slows down badly on a long string: docs/measurements.md, "Figures
# that stood in code comments") or exhaust memory.
MAX_CONFIG_BYTES = 1 << 20
MAX_DATA_BYTES = 1 << 30
# tomllib and json recurse once per nested array or table; a hostile file 5,000 deep overflows Python's
# stack (RecursionError). No file of ours nests deeper than about 6.
MAX_NESTING = 100

# Strings and comments (TOML's #): brackets inside them do not nest.
_STRINGS_AND_COMMENTS = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*', re.DOTALL
)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def read_bounded(
    path: str | os.PathLike[str], error: type[InferProfError], *, limit: int = MAX_CONFIG_BYTES
) -> str:
    """The UTF-8 text of `path`, or `error` naming the file when it is larger than `limit` or nested deeper
    than MAX_NESTING; OSError and UnicodeDecodeError pass through for the caller's own message."""
    check_size(path, error, limit=limit)
    with open(path, encoding="utf-8") as handle:
        text = handle.read(limit + 1)
    if len(text.encode("utf-8", "surrogatepass")) > limit:  # the file grew between stat and read
        raise error(
            f"{path}: more than the {_size(limit)} infer-prof reads from such a file; is it the right file?"
        )
    check_nesting(text, str(path), error)
    return text


def check_size(
    path: str | os.PathLike[str], error: type[InferProfError], *, limit: int = MAX_DATA_BYTES
) -> None:
    """`error` naming the file when it is larger than `limit` (for files a library parses, e.g. CSV tables)."""
    size = os.stat(path).st_size
    if size > limit:
        raise error(
            f"{path}: {size:,} bytes, more than the {_size(limit)} infer-prof reads from such a file; "
            "is it the right file?"
        )


def check_nesting(text: str, source: str, error: type[InferProfError]) -> None:
    """`error` when TOML or JSON `text` nests arrays or tables deeper than MAX_NESTING (checked before a
    recursive parser sees it)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return
    brackets = _NOT_BRACKETS.sub("", _STRINGS_AND_COMMENTS.sub("", text))
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_NESTING:
        raise error(
            f"{source}: arrays or tables nested more than {MAX_NESTING} deep, the most infer-prof reads "
            "(none of its inputs nests like that)"
        )


def read_toml(path: str | os.PathLike[str], error: type[InferProfError], *, kind: str) -> tuple[dict, str]:
    """The one reader of a TOML file a user hands us (scenario, sweep, budget, engine table): its table and its
    text, or `error` naming the file and the fix when it cannot be read, is not UTF-8, is too large or too deep,
    or is not TOML. `kind` names the file in the message ("scenario file", "engine table")."""
    import tomllib

    try:
        text = read_bounded(path, error)
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: not a text file (byte {exc.start} is not UTF-8); it must be a TOML {kind}"
        ) from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {kind} ({exc.strerror or exc})") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line N, column M)"
        raise error(f"{path}: malformed TOML: {exc}; it must be a TOML {kind}") from None


def parse_json(
    data: str | bytes, source: str, error: type[InferProfError], *, limit: int = MAX_DATA_BYTES
) -> object:
    """The one parser of JSON from outside (a file's text, a server's reply): the value, or `error` naming
    `source` when it is larger than `limit`, not UTF-8, nested deeper than MAX_NESTING or not JSON. The caller
    checks the value's shape and types."""
    import json

    if len(data) > limit:
        raise error(f"{source}: more than the {_size(limit)} infer-prof reads from such a reply or file")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{source}: not UTF-8 text (byte {exc.start}); expected JSON") from None
    check_nesting(data, source, error)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise error(f"{source}: not valid JSON ({detail[:120]})") from None


def _size(limit: int) -> str:
    return (
        f"{limit >> 30} GiB"
        if limit >= 1 << 30
        else f"{limit >> 20} MiB"
        if limit >= 1 << 20
        else f"{limit:,} bytes"
    )


# -- OS errors on output paths -------------------------------------------------------------------
_OUTPUT_FIXES = {
    errno.ENOSPC: "free some space or choose another place",
    errno.EDQUOT: "free some of your quota or choose another place",
    errno.EROFS: "choose a writable place",
    errno.EACCES: "choose a place you may write",
    errno.EPERM: "choose a place you may write",
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.ENOTDIR: "a part of the path is a file: choose another path",
    errno.EISDIR: "a directory stands there: choose another path",
    errno.EEXIST: "choose another path",
    errno.EMLINK: "choose another place",
    errno.EFBIG: "choose another place",
}
OUTPUT_ERRNOS = frozenset(_OUTPUT_FIXES)


def output_error(
    exc: OSError, path: str | os.PathLike[str] | None = None, *, verb: str = "write"
) -> OutputError:
    """The one message for an OS error on an output path: the path, what the errno means, and the fix."""
    where = path if path is not None else (exc.filename if exc.filename is not None else "an output file")
    meaning = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))
    fix = _OUTPUT_FIXES.get(exc.errno or 0, "choose another place")
    name = errno.errorcode.get(exc.errno or 0)
    return OutputError(f"cannot {verb} {where}: {meaning}{f' ({name})' if name else ''}; {fix}")
