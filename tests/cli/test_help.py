"""`--help` at 80 columns never cuts its own words: every command's defaults and metavars are shown whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_imports import every_help

# Renders each argv's help in one interpreter at COLUMNS=80; `entry` is "main" (the console script, which
# installs the folding help) or "app" (typer's own rendering, the control that shows what is fixed).
PROBE = """
import contextlib, io, json, sys
from infer_prof.cli.main import main
from infer_prof.cli.app import app
entry, out, texts = sys.argv[1], sys.argv[2], {}
for argv in json.loads(sys.argv[3]):
    sys.argv = ["infer-prof", *argv]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            main() if entry == "main" else app(standalone_mode=False)
        except SystemExit:
            pass
    texts[" ".join(argv)] = buffer.getvalue()
open(out, "w").write(json.dumps(texts))
"""


def render(entry: str, argvs: list[list[str]], tmp_path: Path) -> dict[str, str]:
    out = tmp_path / f"{entry}.json"
    env = {**os.environ, "COLUMNS": "80", "TERMINAL_WIDTH": "80"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, entry, str(out), json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert out.exists(), done.stderr
    return json.loads(out.read_text())


def test_no_help_cuts_a_word_at_80_columns(tmp_path):
    texts = render("main", every_help(), tmp_path)
    assert len(texts) > 20
    for argv, text in texts.items():
        assert "Usage:" in text, argv
        assert "…" not in text, f"`infer-prof {argv}` at 80 columns cuts a word:\n{text}"
        assert max(len(line) for line in text.splitlines()) <= 80, argv
    # The words that were cut before are there whole, folded at the column's edge.
    run_help = "".join(line.strip(" │") for line in texts["run --help"].splitlines())
    assert "runs/<timestamp>-<scenario>" in run_help
    assert "synthetic:<tiny|small|base|large>" in run_help


def test_typers_own_rendering_would_cut_them(tmp_path):
    """The control: without the folding help, the same tables end the long words in "…"."""
    texts = render("app", [["run", "--help"]], tmp_path)
    assert "…" in texts["run --help"]
