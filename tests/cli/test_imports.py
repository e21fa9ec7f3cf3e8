"""The CLI's quick paths (every --help, doctor, the lists, usage errors) import no torch, pandas, scipy,
matplotlib or reports: each is checked in a fresh interpreter, by what sys.modules holds when it exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "pandas", "matplotlib", "scipy", "infer_prof.reports")

# Runs each argv through the console-script entry in one fresh interpreter and records, per argv, its exit
# code and the heavy top-level modules loaded so far (so the first command to pull one in is the culprit).
PROBE = """
import json, sys
from infer_prof.cli.main import main
heavy, out, seen = json.loads(sys.argv[1]), sys.argv[2], {}
for argv in json.loads(sys.argv[3]):
    sys.argv = ["infer-prof", *argv]
    try:
        main()
        code = 0
    except SystemExit as exit:
        code = exit.code
    seen[" ".join(argv)] = {"code": code, "heavy": sorted(name for name in heavy if name in sys.modules)}
open(out, "w").write(json.dumps(seen))
"""


def probe(argvs: list[list[str]], tmp_path: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    out = tmp_path / "seen.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), str(out), json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        check=False,
    )
    assert out.exists(), done.stderr
    return json.loads(out.read_text())


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "COLUMNS": "100"}


def every_help() -> list[list[str]]:
    """`--help` of the app, of every command and of every subcommand, found by walking the click tree."""
    import typer.main

    from infer_prof.cli.app import app
    from infer_prof.cli.main import main  # noqa: F401  (registers the commands)

    found: list[list[str]] = [["--help"]]

    def walk(command, path: list[str]) -> None:  # type: ignore[no-untyped-def]
        for name, sub in getattr(command, "commands", {}).items():
            found.append([*path, name, "--help"])
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_every_help_is_light(tmp_path):
    argvs = every_help()
    assert {"run", "serve", "sweep", "budget", "scenarios", "models"} <= {argv[0] for argv in argvs}
    seen = probe(argvs, tmp_path)
    for argv, result in seen.items():
        assert result["code"] == 0, argv
        assert result["heavy"] == [], f"`infer-prof {argv}` imported {result['heavy']}"


QUICK = [
    ["doctor"],
    ["scenarios", "list"],
    ["scenarios", "show", "chat"],
    ["models", "list"],
    ["sweep", "list"],
]
USAGE_ERRORS = [
    ["--no-such-flag"],
    ["no-such-command"],
    ["run", "--requests", "many"],
    ["run", "--bogus"],
    ["sweep", "report"],
    ["compare", "--repeat", "x"],
    ["serve", "--port", "http"],
]


@pytest.mark.parametrize("argv", QUICK + USAGE_ERRORS, ids=" ".join)
def test_quick_commands_and_usage_errors_are_light(argv, tmp_path):
    result = probe([argv], tmp_path)[" ".join(argv)]
    assert result["code"] == (0 if argv in QUICK else 2)
    assert result["heavy"] == [], f"`infer-prof {' '.join(argv)}` imported {result['heavy']}"


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The check can fail: `report` on a folder that is no run imports the reports before it refuses it."""
    result = probe([["report", str(tmp_path)]], tmp_path)[f"report {tmp_path}"]
    assert result["code"] == 2
    assert "infer_prof.reports" in result["heavy"]
