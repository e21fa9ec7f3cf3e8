"""Atomic file writes: a reader sees the old file or the new one, never half of one, with the user's umask; an OS
error on the way (disk full, read-only, name too long) leaves the old file and becomes one OutputError."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal, overload

from ...errors import output_error


# The callback gets a text handle, or a binary one with binary=True.
@overload
def write_atomic(
    path: str | os.PathLike[str], write: Callable[[IO[str]], object], *, binary: Literal[False] = False
) -> Path: ...


@overload
def write_atomic(
    path: str | os.PathLike[str], write: Callable[[IO[bytes]], object], *, binary: Literal[True]
) -> Path: ...


def write_atomic(
    path: str | os.PathLike[str],
    write: Callable[[IO[str]], object] | Callable[[IO[bytes]], object],
    *,
    binary: bool = False,
) -> Path:
    """Call write(fileobj) on a temp file beside `path`, fsync it, then rename it over `path`.

    The file gets the permissions a plain open() would give it (0666 less the umask): mkstemp makes
    0600 files, and a run directory shared on a team server must be readable by the team.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise output_error(exc, target) from None
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        encoding, newline = (None, None) if binary else ("utf-8", "")
        with os.fdopen(fd, "wb" if binary else "w", encoding=encoding, newline=newline) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException as exc:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise output_error(exc, target) from None
        raise
    return target


def current_umask() -> int:
    """The process umask, from /proc where it can be read without changing it (other threads may be
    creating files meanwhile); elsewhere by setting it and putting it back at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    return write_atomic(path, lambda handle: handle.write(text))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    return write_atomic(path, lambda handle: handle.write(data), binary=True)


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    # numpy scalars and paths show up in results; everything else is a bug worth a loud error.
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
