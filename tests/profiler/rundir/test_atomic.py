"""Atomic writes leave files with the permissions the user's umask gives, never mkstemp's private 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from infer_prof.profiler.rundir.atomic import (
    current_umask,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)


@contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path) -> int:  # type: ignore[no-untyped-def]
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600), (0o002, 0o664)])
def test_files_follow_the_umask(tmp_path, mask, expected):
    with umask(mask):
        assert current_umask() == mask
        written = [
            write_text_atomic(tmp_path / "a.txt", "text"),
            write_bytes_atomic(tmp_path / "b.bin", b"\x00\x01"),
            write_json_atomic(tmp_path / "c.json", {"a": 1}),
        ]
    assert [_mode(path) for path in written] == [expected] * 3


def test_a_rewrite_takes_the_umask_of_now(tmp_path):
    path = tmp_path / "result.json"
    with umask(0o077):
        write_text_atomic(path, "first")
    with umask(0o022):
        write_text_atomic(path, "second")
    assert path.read_text() == "second" and _mode(path) == 0o644


def test_every_report_file_is_readable_by_the_group_and_others(tmp_path):
    from infer_prof.reports.run.generate import generate_reports
    from tests.support.run_dirs import make_run_dir

    with umask(0o022):
        run = make_run_dir(tmp_path / "run", seed=3, n_requests=20, n_steps=40)
        generate_reports(run)
    modes = {path.name: _mode(path) for path in run.iterdir()}
    assert modes and all(mode == 0o644 for mode in modes.values()), modes
