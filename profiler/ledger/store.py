"""The ledger file: where it lives, one record appended under a lock, and every record read back.

Appends are one JSON line each, written while holding an exclusive flock on the file and fsynced before
the lock is let go, so runs that finish at the same time (a sweep's cells, two terminals) never
interleave or lose a line. A line left half-written by a crash cannot swallow the next record: an append
that finds the file not ending in a newline starts on a fresh line, and the reader names the damaged line
and skips it.
"""

from __future__ import annotations

import fcntl
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import LedgerError, output_error
from .records import LedgerRecord, from_line, to_line

LEDGER_ENV = "INFER_PROF_LEDGER"
LEDGER_NAME = "ledger.jsonl"
DEFAULT_RUNS = Path("runs")  # where `run` puts run directories by default (profiler.rundir.outdir)


def ledger_path(run_dir: Path | None = None, given: Path | None = None) -> Path:
    """The ledger a run appends to: the one given (--ledger), else INFER_PROF_LEDGER, else ledger.jsonl beside
    the run directory (runs/ledger.jsonl for the default runs/<timestamp>-<scenario>); without a run
    directory, runs/ledger.jsonl, which is what `infer-prof ledger` reads by default."""
    return chosen_ledger(run_dir, given)[0]


def chosen_ledger(run_dir: Path | None = None, given: Path | None = None) -> tuple[Path, str]:
    """ledger_path's answer and what chose it ("--ledger", INFER_PROF_LEDGER or "the default ledger"), for errors."""
    if given is not None:
        return Path(given), "--ledger"
    from_env = os.environ.get(LEDGER_ENV, "").strip()
    if from_env:
        return Path(from_env).expanduser(), LEDGER_ENV
    parent = Path(run_dir).parent if run_dir is not None else DEFAULT_RUNS
    return parent / LEDGER_NAME, "the default ledger"


def check_appendable(path: Path, *, source: str) -> None:
    """LedgerError naming `source` (the flag or variable that chose it) unless `path` can be appended to: a
    regular file we may write, or a new name in a folder we may write (or create). Checked before a run starts."""
    if path.exists():
        if not path.is_file():
            raise LedgerError(f"{source}: {path} is not a file; name a ledger file (e.g. runs/{LEDGER_NAME})")
        if not os.access(path, os.W_OK):
            raise LedgerError(f"{source}: {path} cannot be written; make it writable or name another file")
        return
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the folder append_record would create it under
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise LedgerError(
            f"{source}: cannot create {path} ({folder} is not a writable folder); name another file"
        )


def append_record(record: LedgerRecord, path: Path | None = None) -> Path:
    """Append one record to the ledger at `path` (default: ledger_path()) and return the file used.

    ValueError for a record that would not read back (a NaN, an unknown kind); OutputError when the file
    cannot be written."""
    line = to_line(record)  # ValueError for a NaN or an infinity: JSON has neither
    from_line(line)  # the record reads back, or it is not written
    target = Path(path) if path is not None else ledger_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                data = (line + "\n").encode("utf-8")
                size = os.fstat(handle.fileno()).st_size
                if size:
                    handle.seek(size - 1)
                    if handle.read(1) != b"\n":  # a half line a crash left behind stays on its own line
                        data = b"\n" + data
                handle.write(data)  # "a" mode: at the end whatever the position
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    except OSError as exc:
        raise output_error(exc, target, verb="append to") from None
    return target


@dataclass(frozen=True, slots=True)
class DamagedLine:
    """A ledger line that is not a record: its number (from 1), why, and its first characters."""

    number: int
    reason: str
    text: str


@dataclass(frozen=True, slots=True)
class Ledger:
    """A ledger file read back: its records in file order, and the lines that could not be read."""

    path: Path
    records: list[LedgerRecord] = field(default_factory=list)
    damaged: list[DamagedLine] = field(default_factory=list)


def load_ledger(path: Path) -> Ledger:
    """Every record of the ledger at `path`; damaged lines are listed, not raised. LedgerError for a path that
    does not exist or is not a readable file."""
    path = Path(path)
    if not path.exists():
        raise LedgerError(
            f"no ledger at {path}: `infer-prof run --verify` appends to runs/{LEDGER_NAME} by default "
            f"(or to --ledger PATH, or {LEDGER_ENV})"
        )
    if not path.is_file():
        raise LedgerError(f"{path} is not a file; name a ledger file (e.g. runs/{LEDGER_NAME})")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror or exc}") from None
    records: list[LedgerRecord] = []
    damaged: list[DamagedLine] = []
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        if not chunk.strip():
            continue
        text = chunk.decode("utf-8", errors="replace")
        try:
            records.append(from_line(text))
        except ValueError as exc:
            damaged.append(DamagedLine(number, str(exc), text[:60]))
    return Ledger(path, records, damaged)


def read_ledger(path: Path) -> list[LedgerRecord]:
    """The ledger's records; each damaged line is skipped with one warning naming its number and what is wrong."""
    ledger = load_ledger(path)
    for line in ledger.damaged:
        warnings.warn(f"{ledger.path}:{line.number}: skipped, {line.reason}", stacklevel=2)
    return ledger.records
