"""Corpus cases for the limits and faults issue 39 found, and for areas the first corpus had not tried: damaged
sweep directories, budget files and `--run`s, every `serve` option, `golden` and `bench` options."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.corpus.cases import SCENARIO_OK, SYNTH, Corpus, _edit_result, _write

DEEP = "[" * 5000 + "]" * 5000
BUDGET_OK = '[[budget]]\nmetric = "throughput"\nmin = 0\n'
SWEEP_OK = (
    'description = "one cell"\nrepeats = 1\nrequests = 2\n[axes]\nmodel = ["synthetic:tiny"]\nclients = [1]\n'
)


def limits(c: Corpus) -> None:
    """One size and nesting limit for every parsed file; counts bounded by the model and the scenario."""
    big = "a" * (2 << 20)  # 2 MiB: past the 1 MiB a hand-written file may hold, and quick to write
    scenarios = {
        "deep-array": SCENARIO_OK + f"x = {DEEP}\n",
        "deep-inline-tables": SCENARIO_OK + "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
        "description-huge": SCENARIO_OK.replace('description = "ok"', f'description = "{big}"'),
        "description-long": SCENARIO_OK.replace('description = "ok"', f'description = "{"a" * 600}"'),
        "comment-huge": SCENARIO_OK + "# " + big + "\n",
        "warmup-over-requests": SCENARIO_OK.replace(
            "num_requests = 4", "num_requests = 3\nwarmup_requests = 50"
        ),
    }
    for name, text in scenarios.items():
        path = c.file(f"limits/scenario-{name}.toml", text)
        c.add(
            f"limit-run-scenario-{name}",
            ["run", *SYNTH, "-s", path, "-o", f"out-limit-{name}"],
            watch=[f"out-limit-{name}"],
        )
    c.add("limit-scenarios-show-deep", ["scenarios", "show", c.root / "limits/scenario-deep-array.toml"])
    c.add(
        "limit-scenarios-show-huge", ["scenarios", "show", c.root / "limits/scenario-description-huge.toml"]
    )
    for name, text in (("deep", SWEEP_OK + f"x = {DEEP}\n"), ("huge", "# " + big + "\n" + SWEEP_OK)):
        path = c.file(f"limits/sweep-{name}.toml", text)
        c.add(
            f"limit-sweep-{name}",
            ["sweep", "run", path, "-o", f"out-limit-sweep-{name}"],
            watch=[f"out-limit-sweep-{name}"],
        )
    for name, text in (("deep", BUDGET_OK + f"x = {DEEP}\n"), ("huge", "# " + big + "\n" + BUDGET_OK)):
        path = c.file(f"limits/budget-{name}.toml", text)
        c.add(f"limit-budget-{name}", ["budget", "check", path, "--run", str(c.good_run())])
    deep_result = c.corrupt_run("limit-result-deep", _write("result.json", '{"a": ' + DEEP + "}"))
    c.add("limit-report-result-deep", ["report", deep_result])
    c.add(
        "limit-compare-result-deep",
        ["compare", deep_result, str(c.good_run()), "-o", "out-limit-cmp"],
        watch=["out-limit-cmp"],
    )
    c.add(
        "limit-budget-run-result-deep", ["budget", "check", c.root / "budget-ok.toml", "--run", deep_result]
    )
    long_name = "n" * 300
    c.add("limit-run-out-name-too-long", ["run", *SYNTH, "-o", f"{long_name}/x"])
    c.add(
        "limit-compare-out-name-too-long", ["compare", str(c.good_run()), str(c.good_run()), "-o", long_name]
    )
    c.add(
        "limit-budget-junit-name-too-long",
        ["budget", "check", "budget-ok.toml", "--run", str(c.good_run()), "--junit", f"{long_name}.xml"],
    )
    c.add("limit-sweep-out-name-too-long", ["sweep", "run", c.root / "sweep-ok.toml", "-o", long_name])
    c.add("limit-generate-max-tokens-over-context", ["generate", *SYNTH, "-n", "1000000000", "hi"])
    c.add("limit-generate-max-tokens-at-context", ["generate", *SYNTH, "-n", "2048", "hi"])
    c.add("limit-golden-max-tokens-over-context", ["golden", *SYNTH, "-n", "5000", "-r", "1"])


def _edit_manifest(edit: Any) -> Any:
    def change(sweep: Path) -> None:
        data = json.loads((sweep / "sweep.json").read_text())
        edit(data)
        (sweep / "sweep.json").write_text(json.dumps(data))

    return change


def sweep_dirs(c: Corpus) -> None:
    """`sweep report` and `sweep run --resume` on damaged sweep directories."""
    from tests.support.sweep_dirs import make_sweep_dir

    good = make_sweep_dir(c.root / "good-sweep", repeats=1)
    damages = {
        "manifest-empty": _write("sweep.json", ""),
        "manifest-a-list": _write("sweep.json", "[1, 2]"),
        "manifest-null": _write("sweep.json", "null"),
        "manifest-deep": _write("sweep.json", '{"a": ' + DEEP + "}"),
        "manifest-kind-other": _edit_manifest(lambda d: d.update(kind="something-else")),
        "manifest-schema-future": _edit_manifest(lambda d: d.update(schema_version=99)),
        "manifest-no-axes": _edit_manifest(lambda d: d.pop("axes")),
        "manifest-no-cells": _edit_manifest(lambda d: d.pop("cells")),
        "manifest-repeats-text": _edit_manifest(lambda d: d.update(repeats="two")),
        "manifest-cells-a-number": _edit_manifest(lambda d: d.update(cells=7)),
        "manifest-axes-a-string": _edit_manifest(lambda d: d.update(axes="clients")),
        "manifest-cells-numbers": _edit_manifest(lambda d: d.update(cells=[1, 2])),
        "manifest-cell-values-a-list": _edit_manifest(lambda d: d["cells"][0].update(values=[1])),
    }
    for name, change in damages.items():
        target = c.root / "sweeps-damaged" / name
        shutil.copytree(good, target)
        change(target)
        c.add(f"sweep-report-{name}", ["sweep", "report", target])
    c.add(
        "sweep-resume-damaged-manifest",
        [
            "sweep",
            "run",
            c.root / "sweep-ok.toml",
            "--resume",
            "-o",
            c.root / "sweeps-damaged/manifest-a-list",
        ],
    )
    other = c.root / "sweeps-damaged/other-axes"
    shutil.copytree(good, other)
    c.add(
        "sweep-resume-another-sweeps-dir", ["sweep", "run", c.root / "sweep-ok.toml", "--resume", "-o", other]
    )


def damaged_runs(c: Corpus) -> None:
    """`report`, `compare` and `budget --run` on run directories damaged in ways the first corpus had not tried."""
    damages = {
        "result-empty": _write("result.json", ""),
        "result-null": _write("result.json", "null"),
        "result-nan-metric": _write("result.json", '{"schema_version": 1, "metrics": NaN}'),
        "result-number": _write("result.json", "3.5"),
        "result-string": _write("result.json", '"a run"'),
        "result-no-schema": _edit_result(lambda d: d.pop("schema_version")),
        "result-schema-text": _edit_result(lambda d: d.update(schema_version="two")),
        "metrics-missing": _edit_result(lambda d: d.pop("metrics")),
        "requests-a-directory": lambda run: ((run / "requests.csv").unlink(), (run / "requests.csv").mkdir()),
    }
    for name, change in damages.items():
        run = c.corrupt_run(f"more-{name}", change)
        c.add(f"report-more-{name}", ["report", run])
        c.add(
            f"compare-more-{name}",
            ["compare", str(c.good_run()), run, "-o", f"out-cmp-more-{name}"],
            watch=[f"out-cmp-more-{name}"],
        )
        if name.startswith(("result", "metrics")):
            c.add(f"budget-run-more-{name}", ["budget", "check", c.root / "budget-ok.toml", "--run", run])
    c.add(
        "compare-a-sweep-dir",
        ["compare", str(c.good_run()), c.root / "good-sweep", "-o", "out-cmp-sweep"],
        watch=["out-cmp-sweep"],
    )
    c.add("report-an-empty-dir", ["report", _empty_dir(c, "empty-run")])
    c.add(
        "budget-run-empty-dir",
        ["budget", "check", c.root / "budget-ok.toml", "--run", _empty_dir(c, "empty-run")],
    )
    c.add(
        "budget-baseline-damaged-run",
        [
            "budget",
            "check",
            c.file("budgets/ratio-2.toml", '[[budget]]\nmetric = "throughput"\nmin_ratio = 0.9\n'),
            "--run",
            str(c.good_run()),
            "--baseline",
            c.root / "runs/more-result-null",
        ],
    )


def _empty_dir(c: Corpus, name: str) -> Path:
    path = c.root / name
    path.mkdir(exist_ok=True)
    return path


def budgets(c: Corpus) -> None:
    """Budget files with values of the wrong type or out of range."""
    variants = {
        "budget-a-table": '[budget]\nmetric = "throughput"\nmin = 1\n',
        "budget-a-string": 'budget = "fast"\n',
        "metric-a-number": "[[budget]]\nmetric = 3\nmin = 1\n",
        "min-a-string": '[[budget]]\nmetric = "throughput"\nmin = "one"\n',
        "max-a-date": '[[budget]]\nmetric = "throughput"\nmax = 1979-05-27\n',
        "min-ratio-negative": '[[budget]]\nmetric = "throughput"\nmin_ratio = -1\n',
        "max-ratio-inf": '[[budget]]\nmetric = "throughput"\nmax_ratio = inf\n',
        "alpha-zero": "alpha = 0\n" + BUDGET_OK,
        "alpha-text": 'alpha = "strict"\n' + BUDGET_OK,
        "repeats-huge": "repeats = 100000000\n" + BUDGET_OK,
        "duplicate-key": '[[budget]]\nmetric = "throughput"\nmetric = "ttft_p50"\nmin = 1\n',
        "nul-bytes": BUDGET_OK + "\x00\x00\n",
    }
    for name, text in variants.items():
        path = c.file(f"budgets-more/{name}.toml", text)
        c.add(f"budget-more-{name}", ["budget", "check", path, "--run", str(c.good_run())])
    c.add(
        "budget-baseline-out-a-file",
        ["budget", "baseline", c.root / "budget-ok.toml", "-o", c.root / "a-file"],
    )


def sweep_files(c: Corpus) -> None:
    """Sweep files with values the first corpus had not tried."""
    variants = {
        "repeats-huge": "repeats = 100000\n[axes]\nclients = [1]\n",
        "repeats-float": "repeats = 1.5\n[axes]\nclients = [1]\n",
        "requests-huge": "requests = 1000000000000\n[axes]\nclients = [1]\n",
        "seconds-negative": "seconds = -1\n[axes]\nclients = [1]\n",
        "clients-huge": "[axes]\nclients = [100000000]\n",
        "axes-a-list": "axes = [1, 2]\n",
        "profile-unknown": 'profile = "everything"\n[axes]\nclients = [1]\n',
        "seed-negative": "seed = -1\n[axes]\nclients = [1]\n",
        "values-mixed": '[axes]\nclients = [1, "two"]\n',
        "description-huge": f'description = "{"d" * 5000}"\n[axes]\nclients = [1]\n',
    }
    for name, text in variants.items():
        if not text.startswith("description"):
            text = f'description = "a bad sweep: {name}"\n' + text
        path = c.file(f"sweeps-more/{name}.toml", text)
        c.add(
            f"sweep-more-{name}",
            ["sweep", "run", path, "-o", f"out-sweep-more-{name}"],
            watch=[f"out-sweep-more-{name}"],
        )


def serve_options(c: Corpus) -> None:
    """Every `serve` option with a value it cannot use, refused before the model loads."""
    bad = {
        "port-float": ["-p", "80.5"],
        "host-ipv4-out-of-range": ["--host", "999.1.1.1"],
        "max-pending-huge": ["--max-pending", "1000000000000"],
        "shutdown-timeout-inf": ["--shutdown-timeout", "inf"],
        "shutdown-timeout-huge": ["--shutdown-timeout", "1e12"],
        "log-level-empty": ["--log-level", ""],
        "served-model-name-newline": ["--served-model-name", "a\nb"],
        "kv-memory-text": ["--kv-memory", "lots"],
        "dtype-unknown": ["--dtype", "float8"],
        "device-unknown": ["--device", "tpu"],
        "threads-zero": ["--threads", "0"],
        "seed-negative": ["--seed", "-1"],
        "block-size-zero": ["--block-size", "0"],
        "graphs-on-the-cpu": ["--graphs", "on", "--device", "cpu"],
        "max-batched-tokens-zero": ["--max-batched-tokens", "0"],
    }
    for name, args in bad.items():
        c.add(f"serve-more-{name}", ["serve", *SYNTH, *args])
    c.add("serve-model-missing-file", ["serve", "-m", "/nonexistent/model.gguf"])


def golden_and_bench(c: Corpus) -> None:
    c.add("golden-combination-empty", ["golden", *SYNTH, "--combination", ""])
    c.add("golden-combination-unknown", ["golden", *SYNTH, "--combination", "gpu"])
    c.add("golden-combination-and-every", ["golden", *SYNTH, "--combination", "all", "--every-combination"])
    c.add("golden-requests-huge", ["golden", *SYNTH, "-r", "1000000000"])
    c.add("golden-max-tokens-huge", ["golden", *SYNTH, "-n", "1000000000"])
    c.add("golden-kv-blocks-huge", ["golden", *SYNTH, "--kv-blocks", "1000000000000"])
    c.add("golden-model-unknown", ["golden", "-m", "nosuch-model"])
    c.add("bench-repeats-negative", ["bench", "native", "--repeats", "-1"])
    c.add("bench-unknown-subcommand", ["bench", "everything"])
