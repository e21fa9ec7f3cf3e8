"""The probe's slowdown delay (`run --launch --probe --what-if`): its accuracy per call, and the probe's own cost with no slowdown asked for, against a revision before slowdowns existed.

    python benchmarks/bench_probe_delay.py [--calls 2000] [--rounds 8] [--against f072b09]

Part 1: a fresh interpreter with the probe (profiler/inject/sitecustomize.py) as its sitecustomize and a
what_if of one component at 0.5x and 1x, stepping a loop whose sampler busies 20 us, 200 us and 2 ms per
call; per delayed call the added time against the requested one (probe/delays-PID.tsv): the median
|added / requested - 1|, the share within 5%, and added / requested summed. Part 2: the cost per call the
probe measures at start-up (probe-PID.json cost_ns, median of 3 x 10,000 calls) with no what_if, for this
tree's probe and the one of --against, in alternating fresh interpreters; the median of each and their ratio;
and whether the recording path's code (the wrappers a probe without a delay runs) is the same in both.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "profiler" / "inject" / "sitecustomize.py"

MODULE = """
import time


def busy(seconds):
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


class Loop:
    def __init__(self, seconds):
        self.seconds = seconds

    def sample(self):
        busy(self.seconds)

    def step(self):
        self.sample()
"""
PROBES = [
    {"component": "step", "module": "loopmod", "function": "Loop.step"},
    {"component": "sampler", "module": "loopmod", "function": "Loop.sample"},
]


def _folder(root: Path, source: str, what_if: dict[str, object] | None) -> Path:
    folder = root / "probe"
    folder.mkdir(parents=True)
    (folder / "sitecustomize.py").write_text(source)
    doc: dict[str, object] = {"probes": PROBES, "switch": "step"}
    if what_if is not None:
        doc["what_if"] = what_if
    (folder / "probes.json").write_text(json.dumps(doc))
    (folder / "switch").write_bytes(b"1")
    (root / "loopmod.py").write_text(MODULE)
    return folder


def _run(root: Path, folder: Path, script: str) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(PYTHONPATH=os.pathsep.join([str(folder), str(root)]), INFER_PROF_PROBE_DIR=str(folder))
    subprocess.run([sys.executable, "-c", script], env=env, cwd=root, check=True, timeout=300)


def accuracy(calls: int) -> None:
    print("part 1: delay per call, requested vs added (levels 0.5x and 1x of the call's own time)")
    for seconds in (20e-6, 200e-6, 2e-3):
        with tempfile.TemporaryDirectory() as directory:
            root = Path(directory)
            folder = _folder(root, PROBE.read_text(), {"components": ["sampler"], "levels": [0.5, 1.0]})
            _run(
                root,
                folder,
                f"import loopmod\nloop = loopmod.Loop({seconds})\nfor _ in range({calls}): loop.step()",
            )
            rows = [
                [int(value) for value in line.split("\t")]
                for path in folder.glob("delays-*.tsv")
                for line in path.read_text().splitlines()
            ]
        ratios = [(done - began) / requested for *_x, began, done, requested, _state in rows if requested > 0]
        errors = sorted(abs(ratio - 1) for ratio in ratios)
        added = sum(done - began for *_x, began, done, _requested, _state in rows)
        requested = sum(row[6] for row in rows)
        print(
            f"  call {seconds * 1e6:6.0f} us: {len(ratios)} delayed calls, median |added/requested - 1| "
            f"{statistics.median(errors):.2%}, within 5%: {sum(e <= 0.05 for e in errors) / len(errors):.1%}, "
            f"p90 error {errors[int(0.9 * len(errors))]:.1%}, summed added/requested {added / requested:.3f}"
        )


def cost(rounds: int, against: str) -> None:
    old = subprocess.run(
        ["git", "show", f"{against}:profiler/inject/sitecustomize.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sources = {"this tree": PROBE.read_text(), against: old}
    found: dict[str, list[int]] = {name: [] for name in sources}
    for turn in range(rounds):
        order = list(sources) if turn % 2 == 0 else list(reversed(sources))
        for name in order:
            with tempfile.TemporaryDirectory() as directory:
                root = Path(directory)
                folder = _folder(root, sources[name], None)
                _run(root, folder, "import loopmod")
                (status,) = folder.glob("probe-*.json")
                found[name].append(int(json.loads(status.read_text())["cost_ns"]))
    print(
        f"part 2: the probe's cost per call with no slowdown (cost_ns at start-up), {rounds} alternating rounds"
    )
    for name, values in found.items():
        print(f"  {name}: median {statistics.median(values)} ns, all {values}")
    ratios = [a / b for a, b in zip(found["this tree"], found[against], strict=True)]
    print(f"  this tree / {against}: median ratio {statistics.median(ratios):.3f} over the rounds")
    same = [name for name in HOT_PATH if _definition(sources["this tree"], name) == _definition(old, name)]
    print(
        f"  the recording path's code, this tree against {against}: identical for {', '.join(same) or 'none'}"
        f" (of {', '.join(HOT_PATH)})"
    )


HOT_PATH = ("_sync_wrapper", "_switching", "_sizing", "_coroutine_wrapper", "_Slices")


def _definition(source: str, name: str) -> str | None:
    """The named top-level function or class of a source, as an AST dump (comments and layout aside)."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return ast.dump(node)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--against", default="f072b09", help="a revision whose probe has no slowdowns")
    args = parser.parse_args()
    accuracy(args.calls)
    cost(args.rounds, args.against)


if __name__ == "__main__":
    main()
