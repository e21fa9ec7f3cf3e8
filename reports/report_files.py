"""Writes one view as STEM.json, a self-contained STEM.html and STEM.pdf, each atomically (compare, sweep compare)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from ..profiler.rundir.atomic import write_atomic, write_json_atomic, write_text_atomic


def write_report_files(
    out_dir: str | Path,
    stem: str,
    document: Mapping[str, object],  # a view's TypedDict, written as JSON
    html: str,
    write_pdf: Callable[[IO[bytes]], None],
) -> dict[str, Path]:
    """STEM.json, STEM.html and STEM.pdf in out_dir; {"STEM_json": path relative to it, ...}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {
        f"{stem}_json": write_json_atomic(out / f"{stem}.json", document),
        f"{stem}_html": write_text_atomic(out / f"{stem}.html", html),
        f"{stem}_pdf": write_atomic(out / f"{stem}.pdf", write_pdf, binary=True),
    }
    return {name: path.relative_to(out) for name, path in written.items()}
