"""The corpus: bad inputs for every command, made at test time (no bad file is committed), each a Case.

A case is a command line plus the files it needs, made under one scratch folder. Every case must end
with exit 2 and one line on stderr, print no traceback, leave no half-written file, and (where
`before_work`) be refused before any model is loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SYNTH = ["-m", "synthetic:tiny"]


@dataclass
class Case:
    id: str
    args: list[str]
    before_work: bool = True  # refused before any model is loaded
    watch: list[str] = field(
        default_factory=list
    )  # paths (relative to the scratch folder) that must not appear
    env: dict[str, str] = field(default_factory=dict)  # environment variables set for this case alone


class Corpus:
    """Builds the files the cases need under `root` and collects the cases."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cases: list[Case] = []
        self._good_run: Path | None = None
        self._deep_run: Path | None = None

    def add(
        self,
        id: str,
        args: list[str],
        *,
        before_work: bool = True,
        watch: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.cases.append(Case(id, [str(arg) for arg in args], before_work, watch or [], env or {}))

    def file(self, name: str, content: str | bytes) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def good_run(self, *, deep: bool = False) -> Path:
        """One valid synthetic run directory (`deep`: with kernel events), copied for each corruption."""
        from tests.support.run_dirs import make_run_dir

        if deep:
            if self._deep_run is None:
                self._deep_run = make_run_dir(
                    self.root / "good-deep-run", seed=1, n_requests=40, n_steps=80, deep=True
                )
            return self._deep_run
        if self._good_run is None:
            self._good_run = make_run_dir(self.root / "good-run", seed=1, n_requests=40, n_steps=80)
        return self._good_run

    def corrupt_run(self, name: str, change: Callable[[Path], None], *, deep: bool = False) -> Path:
        target = self.root / "runs" / name
        shutil.copytree(self.good_run(deep=deep), target)
        change(target)
        return target


def build(root: Path) -> list[Case]:
    corpus = Corpus(root)
    parts = (
        _usage,
        _run_flags,
        _out_paths,
        _scenarios,
        _budgets,
        _gguf,
        _run_dirs,
        _run_tables,
        _generate,
        _serve,
        _sweeps,
        _others,
    )
    for part in parts:
        part(corpus)
    from tests.corpus import process, roots, untried

    for part in (
        untried.limits,
        untried.sweep_dirs,
        untried.damaged_runs,
        untried.budgets,
        untried.sweep_files,
        untried.serve_options,
        untried.golden_and_bench,
        process.cases,
        roots.cases,
    ):
        part(corpus)
    ids = [case.id for case in corpus.cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return corpus.cases


# -- usage errors: every command ---------------------------------------------------------------


def _usage(c: Corpus) -> None:
    for command in (
        "run",
        "compare",
        "report",
        "selftest",
        "golden",
        "generate x",
        "doctor",
        "scenarios list",
        "models list",
        "bench native",
        "budget check b.toml",
        "budget baseline b.toml",
    ):
        c.add(f"usage-unknown-flag-{command.replace(' ', '-')}", [*command.split(), "--no-such-flag"])
    c.add("usage-unknown-command", ["no-such-command"])
    c.add("usage-unknown-subcommand", ["scenarios", "nope"])
    c.add("usage-run-requests-not-int", ["run", "-r", "abc"])
    c.add("usage-run-duration-not-number", ["run", "--duration", "soon"])
    c.add("usage-compare-repeat-not-int", ["compare", "--repeat", "x"])
    c.add("usage-generate-no-prompt", ["generate"])
    c.add("usage-generate-temperature-not-number", ["generate", "hi", "-t", "warm"])
    c.add("usage-report-no-dir", ["report"])
    c.add("usage-budget-check-no-file", ["budget", "check"])
    c.add("usage-bench-repeats-not-int", ["bench", "native", "--repeats", "many"])
    c.add("usage-golden-requests-float", ["golden", "-r", "1.5"])
    c.add("usage-run-missing-value", ["run", "--scenario"])


# -- impossible sizes, counts and values -------------------------------------------------------


def _run_flags(c: Corpus) -> None:
    bad = {
        "requests-zero": ["-r", "0"],
        "requests-negative": ["-r", "-5"],
        "requests-huge": ["-r", "1000000000000"],
        "duration-zero": ["--duration", "0"],
        "duration-negative": ["--duration", "-1"],
        "duration-nan": ["--duration", "nan"],
        "duration-inf": ["--duration", "inf"],
        "profile-unknown": ["--profile", "everything"],
        "native-unknown": ["--native", "gpu"],
        "native-none-and-all": ["--native", "none,all"],
        "native-empty": ["--native", ""],
        "dtype-unknown": ["--dtype", "float8"],
        "device-unknown": ["--device", "tpu"],
        "device-index-text": ["--device", "cuda:x"],
        "device-cpu-index": ["--device", "cpu:1"],
        "device-cuda-absent-or-out-of-range": ["--device", "cuda:9999"],
        "graphs-unknown": ["--graphs", "maybe"],
        "graphs-on-the-cpu": ["--graphs", "on", "--device", "cpu"],
        "kv-blocks-zero": ["--kv-blocks", "0"],
        "kv-blocks-negative": ["--kv-blocks", "-3"],
        "kv-blocks-huge": ["--kv-blocks", "1000000000000"],
        "kv-memory-huge": ["--kv-memory", "1TiB"],
        "kv-memory-text": ["--kv-memory", "lots"],
        "kv-memory-zero": ["--kv-memory", "0"],
        "kv-memory-empty": ["--kv-memory", ""],
        "kv-memory-negative": ["--kv-memory", "-1MiB"],
        "kv-memory-nan": ["--kv-memory", "nanGiB"],
        "kv-both": ["--kv-blocks", "8", "--kv-memory", "1MiB"],
        "block-size-zero": ["--block-size", "0"],
        "block-size-huge": ["--block-size", "100000000"],
        "max-batch-zero": ["--max-batch", "0"],
        "max-batch-huge": ["--max-batch", "1000000000"],
        "max-batched-tokens-zero": ["--max-batched-tokens", "0"],
        "max-batched-tokens-huge": ["--max-batched-tokens", "1000000000000"],
        "policy-unknown": ["--policy", "lifo"],
        "seed-negative": ["--seed", "-1"],
        "seed-huge": ["--seed", "99999999999999999999999"],
        "threads-zero": ["--threads", "0"],
        "threads-huge": ["--threads", "100000"],
        "threads-many": ["--threads", "5000"],
        "scenario-unknown": ["-s", "nosuch"],
        "scenario-missing-file": ["-s", "/nonexistent/scenario.toml"],
        "model-unknown": ["-m", "nosuch-model"],
        "model-missing-file": ["-m", "/nonexistent/model.gguf"],
        "model-synthetic-unknown": ["-m", "synthetic:gigantic"],
        "model-synthetic-empty": ["-m", "synthetic:"],
    }
    for name, flags in bad.items():
        model = [] if any(flag == "-m" for flag in flags) else SYNTH
        c.add(f"run-{name}", ["run", *model, *flags, "-o", "out-" + name], watch=["out-" + name])
    c.add(
        "run-kv-pool-smaller-than-any-request",
        ["run", *SYNTH, "-s", "long-context", "--kv-blocks", "8", "-o", "out-kv8"],
        before_work=False,
        watch=["out-kv8"],
    )
    c.add(
        "run-kv-one-block",
        ["run", *SYNTH, "-s", "edge", "--kv-blocks", "1", "-o", "out-kv1"],
        before_work=False,
        watch=["out-kv1"],
    )
    c.add(
        "run-verify-with-profile-off",
        ["run", *SYNTH, "--profile", "off", "--verify", "-o", "out-voff"],
        watch=["out-voff"],
    )


def _out_paths(c: Corpus) -> None:
    c.file("a-file", "not a directory\n")
    existing = c.root / "finished-run"
    shutil.copytree(c.good_run(), existing)
    outs = {
        "empty": "",
        "proc": "/proc/infer-prof-x",
        "sys": "/sys/infer-prof-x",
        "existing-file": "a-file",
        "under-a-file": "a-file/sub",
        "dev-null": "/dev/null",
        "holds-a-run": "finished-run",
    }
    for name, out in outs.items():
        c.add(f"run-out-{name}", ["run", *SYNTH, "-o", out])
        c.add(f"compare-out-{name}", ["compare", str(c.good_run()), str(c.good_run()), "-o", out])
    for name, path in (("proc", "/proc/x.xml"), ("directory", "."), ("under-a-file", "a-file/j.xml")):
        c.add(
            f"budget-junit-{name}",
            ["budget", "check", "budget-ok.toml", "--run", str(c.good_run()), "--junit", path],
        )
        c.add(
            f"budget-bmf-{name}",
            ["budget", "check", "budget-ok.toml", "--run", str(c.good_run()), "--bmf", path],
        )
    c.file("budget-ok.toml", '[[budget]]\nmetric = "throughput"\nmin = 0\n')


# -- files a user writes: scenarios, budgets, models ---------------------------------------------


SCENARIO_OK = """description = "ok"
num_requests = 4
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 4 }
[load]
mode = "open-loop"
rate = 2.0
"""


def _scenarios(c: Corpus) -> None:
    variants = {
        "binary": b"\x00\xff\xfe\x9b" * 64,
        "not-toml": "this is [not toml",
        "empty": "",
        "unknown-key": SCENARIO_OK + "colour = 3\n",
        "rate-tiny": SCENARIO_OK.replace("rate = 2.0", "rate = 1e-300"),
        "rate-zero": SCENARIO_OK.replace("rate = 2.0", "rate = 0"),
        "rate-negative": SCENARIO_OK.replace("rate = 2.0", "rate = -1"),
        "rate-nan": SCENARIO_OK.replace("rate = 2.0", "rate = nan"),
        "rate-text": SCENARIO_OK.replace("rate = 2.0", 'rate = "fast"'),
        "requests-float-huge": SCENARIO_OK.replace("num_requests = 4", "num_requests = 1e12"),
        "requests-int-huge": SCENARIO_OK.replace("num_requests = 4", "num_requests = 1000000000000"),
        "requests-zero": SCENARIO_OK.replace("num_requests = 4", "num_requests = 0"),
        "requests-bool": SCENARIO_OK.replace("num_requests = 4", "num_requests = true"),
        "mode-unknown": SCENARIO_OK.replace('mode = "open-loop"', 'mode = "sideways"'),
        "closed-without-clients": SCENARIO_OK.replace(
            'mode = "open-loop"\nrate = 2.0', 'mode = "closed-loop"'
        ),
        "clients-zero": SCENARIO_OK.replace(
            'mode = "open-loop"\nrate = 2.0', 'mode = "closed-loop"\nclients = 0'
        ),
        "clients-huge": SCENARIO_OK.replace(
            'mode = "open-loop"\nrate = 2.0', 'mode = "closed-loop"\nclients = 1000000'
        ),
        "burstiness-nan": SCENARIO_OK + "burstiness = nan\n",
        "description-two-lines": SCENARIO_OK.replace('description = "ok"', 'description = "a\\nb"'),
        "lengths-negative": SCENARIO_OK.replace(
            '{ dist = "fixed", value = 16 }', '{ dist = "fixed", value = -16 }'
        ),
        "lengths-huge": SCENARIO_OK.replace(
            '{ dist = "fixed", value = 16 }', '{ dist = "fixed", value = 100000000 }'
        ),
        "lengths-unknown-dist": SCENARIO_OK.replace(
            'dist = "fixed", value = 16', 'dist = "zipfy", value = 16'
        ),
        "prompt-file-missing": SCENARIO_OK.replace(
            'prompt_tokens = { dist = "fixed", value = 16 }\n', 'prompt_file = "nope.txt"\n'
        ),
        "sampling-temperature-negative": SCENARIO_OK + "[sampling]\ntemperature = -1\n",
        "sampling-top-k-huge": SCENARIO_OK + "[sampling]\ntop_k = 99999999999999999\n",
        "duration-negative": SCENARIO_OK + "duration_s = -3\n",
        "seed-huge": SCENARIO_OK.replace(
            'description = "ok"', 'description = "ok"\nseed = 9223372036854775807000'
        ),
    }
    for name, text in variants.items():
        path = c.file(f"scenarios/{name}.toml", text)
        c.add(
            f"scenario-{name}",
            ["run", *SYNTH, "-s", path, "-o", f"out-scenario-{name}"],
            watch=[f"out-scenario-{name}"],
        )
    c.add("scenario-show-binary", ["scenarios", "show", c.root / "scenarios/binary.toml"])
    c.add("scenario-show-not-toml", ["scenarios", "show", c.root / "scenarios/not-toml.toml"])
    c.add("scenario-is-a-directory", ["run", *SYNTH, "-s", c.root / "scenarios"])


BUDGET_OK = '[[budget]]\nmetric = "throughput"\nmin = 0\n'


def _budgets(c: Corpus) -> None:
    variants = {
        "binary": b"\x9b\x00\xff" * 50,
        "not-toml": "[[budget]\nmetric = ",
        "empty": "",
        "no-entries": 'name = "x"\n',
        "max-nan": '[[budget]]\nmetric = "throughput"\nmax = nan\n',
        "min-inf": '[[budget]]\nmetric = "throughput"\nmin = inf\n',
        "min-ratio-nan": '[[budget]]\nmetric = "throughput"\nmin_ratio = nan\n',
        "unknown-metric": '[[budget]]\nmetric = "speediness"\nmin = 1\n',
        "unknown-key": BUDGET_OK + "colour = 1\n",
        "no-bound": '[[budget]]\nmetric = "throughput"\n',
        "min-above-max": '[[budget]]\nmetric = "throughput"\nmin = 5\nmax = 1\n',
        "level-unknown": BUDGET_OK + 'level = "panic"\n',
        "requests-huge": 'requests = 1000000000000\nscenario = "chat"\n' + BUDGET_OK,
        "repeats-zero": "repeats = 0\n" + BUDGET_OK,
        "alpha-one": "alpha = 1.0\n" + BUDGET_OK,
        "native-unknown": 'native = ["gpu"]\nscenario = "chat"\nmodel = "synthetic:tiny"\n' + BUDGET_OK,
    }
    for name, text in variants.items():
        path = c.file(f"budgets/{name}.toml", text)
        c.add(f"budget-{name}", ["budget", "check", path, "--run", str(c.good_run())])
    c.add("budget-missing-file", ["budget", "check", "/nonexistent/budget.toml"])
    c.add("budget-is-a-directory", ["budget", "check", c.root / "budgets"])
    c.add("budget-run-missing", ["budget", "check", c.root / "budget-ok.toml", "--run", "/nonexistent/run"])
    c.add(
        "budget-baseline-garbage",
        [
            "budget",
            "check",
            c.file("budgets/ratio.toml", '[[budget]]\nmetric = "throughput"\nmin_ratio = 0.9\n'),
            "--run",
            str(c.good_run()),
            "--baseline",
            c.file("garbage-baseline", "x"),
        ],
    )
    c.add("budget-baseline-missing-file", ["budget", "baseline", "/nonexistent/budget.toml"])


def _gguf(c: Corpus) -> None:
    from tests.engine.conftest import write_tiny_gguf

    good = c.root / "models/good.gguf"
    good.parent.mkdir(parents=True, exist_ok=True)
    write_tiny_gguf(good)
    data = good.read_bytes()
    for fraction in (0.0, 0.01, 0.05, 0.2, 0.5, 0.9, 0.999):
        cut = int(len(data) * fraction)
        path = c.file(f"models/truncated-{cut}.gguf", data[:cut])
        c.add(
            f"gguf-truncated-{cut}",
            ["run", "-m", path, "-s", "edge", "-r", "1", "-o", f"out-gguf-{cut}"],
            before_work=False,
            watch=[f"out-gguf-{cut}"],
        )
    forged = bytearray(data)
    struct.pack_into("<Q", forged, 8, 2**40)  # tensor count
    c.add(
        "gguf-forged-tensor-count",
        ["run", "-m", c.file("models/forged-tensors.gguf", bytes(forged)), "-o", "out-forged1"],
        before_work=False,
        watch=["out-forged1"],
    )
    forged = bytearray(data)
    struct.pack_into("<Q", forged, 16, 2**40)  # metadata key count
    c.add(
        "gguf-forged-key-count",
        ["run", "-m", c.file("models/forged-keys.gguf", bytes(forged)), "-o", "out-forged2"],
        before_work=False,
        watch=["out-forged2"],
    )
    c.add(
        "gguf-random-bytes",
        ["run", "-m", c.file("models/random.gguf", os.urandom(4096)), "-o", "out-random"],
        before_work=False,
        watch=["out-random"],
    )
    c.add("gguf-empty", ["generate", "hi", "-m", c.file("models/empty.gguf", b"")], before_work=False)
    c.add("gguf-directory", ["generate", "hi", "-m", c.root / "models"], before_work=False)
    c.add("gguf-text-file", ["golden", "-m", c.file("models/readme.gguf", "hello\n")], before_work=False)


# -- run directories that reports, compare and budgets read --------------------------------------


def _write(relative: str, content: str | bytes) -> Callable[[Path], None]:
    def change(run: Path) -> None:
        path = run / relative
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    return change


def _edit_result(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def change(run: Path) -> None:
        data = json.loads((run / "result.json").read_text())
        edit(data)
        (run / "result.json").write_text(json.dumps(data))

    return change


def _truncate(relative: str, keep: float) -> Callable[[Path], None]:
    def change(run: Path) -> None:
        path = run / relative
        text = path.read_bytes()
        path.write_bytes(text[: int(len(text) * keep)])

    return change


def _run_dirs(c: Corpus) -> None:
    def result_is_directory(run: Path) -> None:
        (run / "result.json").unlink()
        (run / "result.json").mkdir()

    corruptions: dict[str, Callable[[Path], None]] = {
        "no-result": lambda run: (run / "result.json").unlink(),
        "result-is-directory": result_is_directory,
        "result-binary": _write("result.json", b"\xff\xfe\x00garbage"),
        "result-not-json": _write("result.json", "{not json"),
        "result-a-list": _write("result.json", "[1, 2, 3]"),
        "result-truncated": _truncate("result.json", 0.5),
        "schema-version-unknown": _edit_result(lambda d: d.update(schema_version=99)),
        "metrics-a-string": _edit_result(lambda d: d.update(metrics="fast")),
        "config-a-list": _edit_result(lambda d: d.update(config=[1, 2])),
        "breakdown-a-number": _edit_result(lambda d: d.update(breakdown=3)),
        "files-escape-etc-passwd": _edit_result(lambda d: d["files"].update(requests="/etc/passwd")),
        "files-escape-parent": _edit_result(lambda d: d["files"].update(steps="../../x.csv")),
        "files-not-a-table": _edit_result(lambda d: d.update(files=["requests.csv"])),
        "requests-binary": _write("requests.csv", b"\x00\x9b\xff" * 100),
        "requests-malformed": _write("requests.csv", 'a,b\n1,"unclosed\n2,3\n'),
        "requests-token-ns-text": _edit_csv("requests.csv", "token_ns", "soon later"),
        "requests-arrival-text": _edit_csv("requests.csv", "arrival_ns", "yesterday"),
        "steps-truncated": _truncate("steps.csv", 0.37),
        "steps-binary": _write("steps.csv", b"\xff" * 300),
        "steps-start-text": _edit_csv("steps.csv", "start_ns", "early"),
        "steps-duration-negative": _edit_csv("steps.csv", "duration_ms", "-5"),
    }
    for name, change in corruptions.items():
        run = c.corrupt_run(name, change)
        c.add(f"report-{name}", ["report", run])
        c.add(
            f"compare-{name}",
            ["compare", run, str(c.good_run()), "-o", f"out-compare-{name}"],
            watch=[f"out-compare-{name}"],
        )
    # compare reads no py-spy samples, so only report must refuse them.
    for name, content in (
        ("samples-binary", b"\x9b\xff\x00" * 100),
        ("samples-malformed", "frame;frame no-count\n"),
    ):
        c.add(f"report-{name}", ["report", c.corrupt_run(name, _write("samples.txt", content))])
        if name.startswith(("result", "schema", "metrics", "config", "files-escape", "requests")):
            c.add(f"budget-run-{name}", ["budget", "check", c.root / "budget-ok.toml", "--run", run])
    c.add("report-missing-dir", ["report", "/nonexistent/run"])
    c.add("report-a-file", ["report", c.file("not-a-run.txt", "x")])
    c.add("compare-one-dir", ["compare", str(c.good_run())])
    c.add("compare-three-dirs", ["compare", str(c.good_run()), str(c.good_run()), str(c.good_run())])


def _run_tables(c: Corpus) -> None:
    """The run's other tables: spans, kernel events and sample labels, each read by `report`."""
    corruptions: dict[str, Callable[[Path], None]] = {
        "spans-binary": _write("spans.csv", b"\x00\xff\x9b" * 200),
        "spans-malformed": _write("spans.csv", 'step,name\n1,"open\n'),
        "spans-truncated": _truncate("spans.csv", 0.41),
        "spans-start-text": _edit_csv("spans.csv", "start_ns", "noon"),
        "spans-depth-negative": _edit_csv("spans.csv", "depth", "-3"),
        "spans-columns-missing": _write("spans.csv", "a,b\n1,2\n"),
        "kernel-events-binary": _write("kernel_events.csv", b"\xff\x00" * 300),
        "kernel-events-malformed": _write("kernel_events.csv", 'window,step\n1,"x\n'),
        "kernel-events-duration-text": _edit_csv("kernel_events.csv", "end_ns", "later"),
        "kernel-events-columns-missing": _write("kernel_events.csv", "x\n1\n"),
        "sample-labels-binary": _write("sample_labels.csv", b"\x9b" * 400),
        "sample-labels-malformed": _write("sample_labels.csv", 'line,thread\n1,"open\n'),
        "sample-labels-line-text": _edit_csv("sample_labels.csv", "line", "first"),
        "sample-labels-columns-missing": _write("sample_labels.csv", "q\n1\n"),
    }
    for name, change in corruptions.items():
        c.add(f"report-{name}", ["report", c.corrupt_run(name, change, deep=name.startswith("kernel"))])


def _edit_csv(relative: str, column: str, value: str) -> Callable[[Path], None]:
    def change(run: Path) -> None:
        import pandas as pd

        path = run / relative
        table = pd.read_csv(path)
        table[column] = table[column].astype(object)
        table.loc[table.index[: max(1, len(table) // 3)], column] = value
        table.to_csv(path, index=False)

    return change


# -- prompts, sampling values and the remaining commands -----------------------------------------


def _generate(c: Corpus) -> None:
    bad = {
        "prompt-not-utf8": ["caf\udce9"],
        "prompt-empty": [""],
        "max-tokens-zero": ["hi", "-n", "0"],
        "max-tokens-negative": ["hi", "-n", "-4"],
        "max-tokens-huge": ["hi", "-n", "100000000000"],
        "temperature-negative": ["hi", "-t", "-1"],
        "temperature-nan": ["hi", "-t", "nan"],
        "temperature-inf": ["hi", "-t", "inf"],
        "top-k-negative": ["hi", "--top-k", "-1"],
        "top-k-huge": ["hi", "--top-k", "99999999999999999999"],
        "top-k-huge-native": ["hi", "--top-k", "99999999999999999999", "--native", "all"],
        "top-p-zero": ["hi", "--top-p", "0"],
        "top-p-above-one": ["hi", "--top-p", "2"],
        "min-p-above-one": ["hi", "--min-p", "1.5"],
        "repetition-penalty-zero": ["hi", "--repetition-penalty", "0"],
        "repetition-penalty-nan": ["hi", "--repetition-penalty", "nan"],
        "seed-huge": ["hi", "--seed", "99999999999999999999999"],
        "model-unknown": ["hi", "-m", "nosuch"],
        "threads-huge": ["hi", "--threads", "100000"],
    }
    for name, args in bad.items():
        model = [] if "-m" in args else SYNTH
        c.add(f"generate-{name}", ["generate", *args, *model])


def _serve(c: Corpus) -> None:
    """`serve` options and `run --target` inputs, refused before a model loads or a request is sent."""
    bad = {
        "port-negative": ["-p", "-1"],
        "port-huge": ["-p", "70000"],
        "port-text": ["-p", "http"],
        "host-empty": ["--host", ""],
        "host-bogus": ["--host", "not a host!"],
        "max-pending-zero": ["--max-pending", "0"],
        "max-pending-negative": ["--max-pending", "-5"],
        "shutdown-timeout-negative": ["--shutdown-timeout", "-1"],
        "shutdown-timeout-nan": ["--shutdown-timeout", "nan"],
        "log-level-unknown": ["--log-level", "loud"],
        "served-model-name-empty": ["--served-model-name", ""],
        "native-unknown": ["--native", "gpu"],
        "kv-blocks-zero": ["--kv-blocks", "0"],
        "max-batch-zero": ["--max-batch", "0"],
        "policy-unknown": ["--policy", "lifo"],
    }
    for name, args in bad.items():
        c.add(f"serve-{name}", ["serve", *SYNTH, *args])
    targets = {
        "not-a-url": ["--target", "localhost"],
        "scheme-ftp": ["--target", "ftp://127.0.0.1:8000"],
        "no-host": ["--target", "http://"],
        "port-huge": ["--target", "http://127.0.0.1:99999"],
        "empty": ["--target", ""],
        "pid-without-target": ["--pid", "1"],
        "pid-negative": ["--target", "http://127.0.0.1:1", "--pid", "-4"],
        "native-with-target": ["--target", "http://127.0.0.1:1", "--native", "all"],
        "kv-blocks-with-target": ["--target", "http://127.0.0.1:1", "--kv-blocks", "8"],
        "nobody-listening": ["--target", "http://127.0.0.1:1"],
    }
    for name, args in targets.items():
        c.add(
            f"run-target-{name}",
            ["run", *args, "-r", "2", "-o", f"out-target-{name}"],
            watch=[f"out-target-{name}"],
        )


def _sweeps(c: Corpus) -> None:
    """Sweep files and sweep directories."""
    good = (
        c.root / "sweep-ok.toml",
        'description = "two cells"\nrepeats = 1\nrequests = 2\n[axes]\nmodel = ["synthetic:tiny"]\nclients = [1]\n',
    )
    c.file(good[0].name, good[1])
    files = {
        "binary": b"\xff\xfe\x00\x9b" * 50,
        "not-toml": "[axes\nmodel = ",
        "no-axes": "repeats = 1\n",
        "axis-unknown": '[axes]\nflavour = ["vanilla"]\n',
        "axis-empty": "[axes]\nclients = []\n",
        "axis-not-a-list": '[axes]\nclients = "many"\n',
        "clients-zero": "[axes]\nclients = [0]\n",
        "clients-text": '[axes]\nclients = ["two"]\n',
        "native-unknown": '[axes]\nnative = ["gpu"]\n',
        "model-unknown": '[axes]\nmodel = ["nosuch"]\n',
        "scenario-unknown": '[axes]\nscenario = ["nosuch"]\n',
        "repeats-zero": "repeats = 0\n[axes]\nclients = [1]\n",
        "repeats-text": 'repeats = "x"\n[axes]\nclients = [1]\n',
        "requests-negative": "requests = -3\n[axes]\nclients = [1]\n",
        "seconds-nan": "seconds = nan\n[axes]\nclients = [1]\n",
        "map-axis-unknown": '[axes]\nclients = [1, 2]\n[map]\nx = "flavour"\n',
        "key-unknown": "colour = 1\n[axes]\nclients = [1]\n",
        "cells-too-many": "[axes]\nclients = ["
        + ", ".join(str(n) for n in range(1, 101))
        + "]\n"
        + "output_tokens = ["
        + ", ".join(str(n) for n in range(1, 101))
        + "]\n",
    }
    for name, content in files.items():
        if isinstance(content, str) and name not in ("not-toml", "no-axes"):
            content = f'description = "a bad sweep: {name}"\n' + content  # so the case reaches its own fault
        path = c.file(f"sweeps/{name}.toml", content)
        c.add(
            f"sweep-file-{name}",
            ["sweep", "run", path, "-o", f"out-sweep-{name}"],
            watch=[f"out-sweep-{name}"],
        )
    c.add("sweep-file-missing", ["sweep", "run", c.root / "no-such-sweep.toml"])
    c.add("sweep-builtin-unknown", ["sweep", "run", "nosuch"])
    c.add("sweep-out-a-file", ["sweep", "run", good[0], "-o", c.file("sweep-out-file", "x")])
    c.add("sweep-cell-cpus-zero", ["sweep", "run", good[0], "--ray", "auto", "--cell-cpus", "0"])
    c.add("sweep-ray-bogus", ["sweep", "run", good[0], "--ray", "sometimes"])
    c.add("sweep-resume-nothing", ["sweep", "run", good[0], "--resume", "-o", c.root / "no-such-sweep-dir"])
    c.add("sweep-report-missing", ["sweep", "report", c.root / "no-such-sweep-dir"])
    c.add("sweep-report-a-file", ["sweep", "report", c.file("not-a-sweep.txt", "x")])
    broken = c.root / "broken-sweep"
    broken.mkdir()
    (broken / "sweep.json").write_bytes(b"\xff{{{")
    c.add("sweep-report-corrupt-state", ["sweep", "report", broken])


def _others(c: Corpus) -> None:
    c.add("golden-requests-zero", ["golden", *SYNTH, "-r", "0"])
    c.add("golden-max-tokens-zero", ["golden", *SYNTH, "-n", "0"])
    c.add("golden-kv-blocks-zero", ["golden", *SYNTH, "--kv-blocks", "0"])
    c.add("golden-max-batch-zero", ["golden", *SYNTH, "--max-batch", "0"])
    c.add("golden-threads-huge", ["golden", *SYNTH, "--threads", "100000"])
    c.add("bench-repeats-zero", ["bench", "native", "--repeats", "0"])
    c.add("bench-repeats-huge", ["bench", "native", "--repeats", "100000000"])
    c.add("selftest-only-unknown", ["selftest", "--only", "nope"])
    c.add("selftest-only-empty", ["selftest", "--only", ","])
    c.add("selftest-out-not-empty", ["selftest", "--only", "idle", "--out", c.good_run()])
    c.add("compare-repeat-zero", ["compare", "--repeat", "0", *SYNTH])
    c.add("compare-repeat-and-dirs", ["compare", str(c.good_run()), "--repeat", "2", *SYNTH])
    c.add("compare-repeat-native-unknown", ["compare", "--repeat", "1", "--after-native", "gpu", *SYNTH])
    c.add("compare-repeat-scenario-unknown", ["compare", "--repeat", "1", "-s", "nosuch", *SYNTH])
    c.add("compare-repeat-requests-zero", ["compare", "--repeat", "1", "-r", "0", *SYNTH])
    c.add("compare-repeat-out-a-file", ["compare", "--repeat", "1", "-o", c.root / "a-file", *SYNTH])
    c.add("scenarios-show-unknown", ["scenarios", "show", "nosuch"])
