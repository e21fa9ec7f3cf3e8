"""How long the CLI takes to start, against `import typer`: import of the entry point and `--help`, interleaved rounds.

Run: python benchmarks/bench_cli_startup.py [--rounds 7] [--before /path/to/an/older/checkout]
Each round runs, in turn, fresh interpreters for `import typer`, `from infer_prof.cli.main import
main` and `python -m infer_prof.cli --help` (the console script's code), so a busy machine slows all
alike; it prints each one's median wall time and its ratio to `import typer`'s, and the entry point's own
cumulative import time from `python -X importtime`. --before adds the same two commands run against
another checkout (one with the installed namespace, infer_prof), put first on PYTHONPATH through a link.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
ENTRY = "from infer_prof.cli.main import main"


def cli_package(root: Path) -> str:
    """Where `root`'s CLI lives: cli/, or profiler/cli/ in a checkout from before it moved up (issue #63)."""
    return "infer_prof.cli" if (root / "cli" / "main.py").exists() else "infer_prof.profiler.cli"


def entry(root: Path) -> str:
    return f"from {cli_package(root)}.main import main"


FLOOR = (
    "import sys, typer\napp = typer.Typer(rich_markup_mode='rich')\n@app.command()\ndef hello(name: str = 'x') -> None:\n"
    "    pass\nsys.argv = ['hello', '--help']\napp()"
)


@cache
def import_path(root: Path) -> str:
    """A folder whose one entry, infer_prof, links to `root`: first on PYTHONPATH, it makes `root` the
    checkout that `import infer_prof` finds (ahead of the installed one)."""
    folder = Path(tempfile.mkdtemp(prefix="cli_startup_"))
    (folder / "infer_prof").symlink_to(root.resolve(), target_is_directory=True)
    return str(folder)


def wall(argv: list[str], root: Path) -> float:
    env = {**os.environ, "PYTHONPATH": import_path(root), "COLUMNS": "100"}
    started = time.perf_counter()
    subprocess.run(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def importtime_us(root: Path) -> int:
    """`python -X importtime`'s cumulative microseconds for the entry point's whole import."""
    env = {**os.environ, "PYTHONPATH": import_path(root)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", entry(root)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    pattern = r"\|\s+" + re.escape(cli_package(root) + ".main") + "$"
    lines = [line for line in done.stderr.splitlines() if re.search(pattern, line)]
    return int(lines[-1].split("|")[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before", type=Path, help="another checkout to time the same commands on")
    args = parser.parse_args()
    commands = {
        "import typer": ([sys.executable, "-c", "import typer"], HERE),
        ENTRY: (
            [sys.executable, "-c", ENTRY],
            HERE,
        ),
        "infer-prof --help": ([sys.executable, "-m", "infer_prof.cli", "--help"], HERE),
        # The floor of any Rich-formatted typer help: typer.rich_utils imports rich and markdown-it.
        "a one-command typer app's --help": ([sys.executable, "-c", FLOOR], HERE),
    }
    if args.before is not None:
        commands["before: " + ENTRY] = ([sys.executable, "-c", entry(args.before)], args.before)
        commands["before: infer-prof --help"] = (
            [sys.executable, "-m", cli_package(args.before), "--help"],
            args.before,
        )
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, (argv, root) in commands.items():
            times[name].append(wall(argv, root))
    base = statistics.median(times["import typer"])
    print(f"{args.rounds} interleaved rounds; median wall time, and its ratio to `import typer`")
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"  {name:45s} {median * 1000:8.0f} ms  {median / base:5.2f}x  (min {min(values) * 1000:.0f} ms)"
        )
    print(
        f"python -X importtime: cli.main cumulative {importtime_us(HERE) / 1000:.0f} ms"
        + (f" (before: {importtime_us(args.before) / 1000:.0f} ms)" if args.before is not None else "")
    )


if __name__ == "__main__":
    main()
