"""The console script pyproject.toml declares and `python -m infer_prof.cli` reach the CLI's one entry point, and
setup.py installs every room tests/test_layers.py walks (cli/ among them)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

from infer_prof.cli.main import main
from tests.test_layers import ROOMS

ROOT = Path(__file__).resolve().parents[2]


def test_the_console_script_names_the_entry_point() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, name = scripts["infer-prof"].partition(":")
    assert module == "infer_prof.cli"
    assert getattr(importlib.import_module(module), name) is main


def test_setup_installs_every_room() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    installed = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ROOMS" for t in node.targets)
    )
    assert sorted(installed) == sorted(ROOMS)


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "infer_prof.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "python -m infer_prof.cli" in done.stdout
