"""Where a command writes: checked before any work starts, and a run directory claimed so that no two runs share one."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ...errors import OptionError, output_error

LOCK_NAME = ".infer-prof.lock"
_Checked = TypeVar("_Checked", bound=Callable)


def _os_errors_as_output_errors(check: _Checked) -> _Checked:
    """Looking at a path can fail too (a 300-character name: ENAMETOOLONG from stat): one line, exit 2."""

    @functools.wraps(check)
    def checked(path: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return check(path, *args, **kwargs)
        except OSError as exc:
            raise output_error(exc, exc.filename or path) from None

    return checked  # type: ignore[return-value]


@_os_errors_as_output_errors
def check_run_dir(path: Path, option: str = "--out") -> None:
    """A run directory must be new or empty, and creatable and writable by this process."""
    if str(path) == "":
        raise OptionError(f"{option} is empty: give a directory for the run, e.g. {option} runs/my-run")
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise OptionError(f"{option} {path} exists and is not a directory: choose a new directory")
        if (path / "result.json").exists():
            raise OptionError(f"{option} {path} already holds a run: choose another directory or remove it")
        if (path / LOCK_NAME).exists():
            raise OptionError(f"{option} {path}: {_lock_owner(path)}")
        if any(path.iterdir()):
            raise OptionError(f"{option} {path} is not empty: choose a new or empty directory")
        _probe(path, option)
        return
    _probe(_nearest_existing(path, option), option)


@_os_errors_as_output_errors
def check_output_dir(path: Path, option: str = "--out") -> None:
    """A directory for report files: existing or creatable, and writable."""
    if str(path) == "":
        raise OptionError(f"{option} is empty: give a directory, e.g. {option} runs/compare")
    if path.exists() and not path.is_dir():
        raise OptionError(f"{option} {path} exists and is not a directory: choose a directory")
    _probe(path if path.exists() else _nearest_existing(path, option), option)


@_os_errors_as_output_errors
def check_output_file(path: Path, option: str) -> None:
    """A file to write (JUnit, BMF): not a directory, and its folder existing or creatable, and writable."""
    if str(path) == "" or path.is_dir():
        raise OptionError(f"{option} {path}: give the path of a file to write, not a directory")
    if path.exists() and not path.is_file():
        raise OptionError(f"{option} {path} exists and is not a regular file: choose another path")
    _probe(path.parent if path.parent.exists() else _nearest_existing(path.parent, option), option)


def _nearest_existing(path: Path, option: str) -> Path:
    """The closest folder above `path` that exists; it must be a directory for `path` to be made."""
    for ancestor in [path, *path.absolute().parents]:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise OptionError(
                    f"{option} {path}: {ancestor} is a file, so nothing can be created under it"
                )
            return ancestor
    return Path("/")


def _probe(folder: Path, option: str) -> None:
    """Create and remove a scratch folder in `folder`: the only test of writability that also holds for root."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".infer-prof-probe-", dir=folder))
    except OSError as exc:
        raise output_error(exc, f"{option} {folder}" if option else folder) from None


@dataclass
class RunDirClaim:
    """A run directory this process holds: its lock file says who writes there until release()."""

    path: Path
    created: bool

    def release(self, *, keep: bool = True) -> None:
        """Drop the lock; without `keep`, also remove the directory if this claim made it and it is still empty."""
        (self.path / LOCK_NAME).unlink(missing_ok=True)
        if not keep and self.created:
            try:
                self.path.rmdir()
            except OSError:
                pass


@_os_errors_as_output_errors
def claim_run_dir(path: Path, option: str = "--out") -> RunDirClaim:
    """Make (or take) the run directory and lock it; a second run pointed at it is refused."""
    check_run_dir(path, option)
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path / LOCK_NAME, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise OptionError(f"{option} {path}: {_lock_owner(path)}") from None
    except OSError as exc:
        raise OptionError(
            f"{option}: cannot create {path} ({exc.strerror or exc}); choose a writable place"
        ) from None
    with os.fdopen(descriptor, "w") as handle:
        handle.write(f"{os.getpid()}\n")
    return RunDirClaim(path, created)


@_os_errors_as_output_errors
def claim_default_run_dir(scenario_name: str, root: Path = Path("runs")) -> RunDirClaim:
    """runs/<time>-<scenario>, with -2, -3, ... when another run took that name in the same second."""
    check_output_dir(root, "")  # an unwritable working directory is one line, not 999 refused names
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for number in range(1, 1000):
        candidate = root / (f"{stamp}-{scenario_name}" + ("" if number == 1 else f"-{number}"))
        if not candidate.exists():
            try:
                return claim_run_dir(candidate)
            except OptionError:
                continue  # taken between the look and the claim: try the next name
    raise OptionError(f"could not find a free run directory under {root}: pass --out DIR")


def _lock_owner(path: Path) -> str:
    try:
        pid = int((path / LOCK_NAME).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        pid = None
    if pid is not None and _alive(pid):
        return f"another run (pid {pid}) is writing this directory: wait for it or choose another --out"
    return f"a run that stopped without finishing left its lock {LOCK_NAME} here: remove the directory or choose another"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
