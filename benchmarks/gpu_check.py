"""The GPU path checked in one prepared script (under 10 minutes on one GPU); exits 1 when any check fails.

Run: python benchmarks/gpu_check.py [--out DIR] [--requests N] [--rounds K] [--archive FILE.tar.gz].
Checks, each printed as it finishes:
  0. CUDA is there (a GPU check on a machine without one fails; `--device cpu` rehearses the script's
     plumbing on the CPU instead, without the CUDA tests and the graphs);
  1. the suite's CUDA tests (tests/engine/test_on_cuda.py: GPU vs CPU logits and greedy tokens, graphs
     replaying the eager steps, the Python sampler's tokens on both devices, CUDA event timing);
  2. `infer-prof selftest --quick` (the planted cases; their run directories are kept in DIR/selftest);
  3. greedy tokens of the engine with CUDA graphs off and on, compared token by token;
  4. `infer-prof run --device cuda` on concurrency-30 and edge with graphs off and on: tokens/s, the
     interpreter share, the GPU's busy / host-bound idle / no-work shares and who the host-bound idle
     waited on, kernels and launches per step, and this process's NVML memory and SM figures;
  5. `--native core,sampler` against none on concurrency-30 (graphs on), K interleaved rounds: the
     C twins' measured gain on the GPU, as the ratios of tokens/s, of the engine's mean step, and of
     the host time a decode step spends in the paths the twins replace.
Every figure goes to DIR/gpu_check.json; each run directory keeps its terminal summary (summary.txt), and
`--archive` packs them all into one file to bring back.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("concurrency-30", "edge")
NATIVE = "core,sampler"


def say(message: str) -> None:
    print(message, flush=True)


def cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return child([sys.executable, "-m", "infer_prof.cli", *args], timeout)


def child(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """A child process in the repository's root; one that outlives its timeout counts as exit 124 (a failed check)."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT)
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(
            command, 124, _text(expired.stdout), f"timed out after {timeout:.0f} s"
        )


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def greedy_tokens(model_name: str, device: str, graphs: str) -> list[list[int]]:
    """Greedy outputs of eight prompts, from the engine built the way `run` builds it."""
    from infer_prof.engine.types import SamplingParams
    from infer_prof.profiler.session.builder import build_engine, load_for_options
    from infer_prof.profiler.session.options import EngineOptions

    options = EngineOptions(model=model_name, device=device, dtype="auto", graphs=graphs, max_batch=8)
    built = build_engine(load_for_options(options), options)
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    prompts = [f"Question {i}: name a colour and a number." for i in range(8)]
    with built.engine as engine:
        handles = [engine.submit(prompt, params, chat=True) for prompt in prompts]
        return [handle.result(timeout=300).token_ids for handle in handles]


def _stats_mean(stats: Any) -> float | None:
    return stats.get("mean") if isinstance(stats, dict) else None


def run_figures(run_dir: Path) -> dict[str, Any]:
    """The figures the issue asks for, read back from one run directory's result.json."""
    result = json.loads((run_dir / "result.json").read_text())
    spans = ((result.get("breakdown") or {}).get("methods") or {}).get("spans") or {}
    components = sorted((spans.get("components") or {}).items(), key=lambda item: -(item[1] or 0))[:5]
    gpu_time = result.get("gpu_time") or {}
    # The figures are in gpu_time; without it (a CPU run), collectors.gpu still says why NVML did not run.
    nvml = gpu_time.get("nvml") or (result.get("collectors") or {}).get("gpu") or {}
    process = nvml.get("process") or {}
    engine = result.get("engine") or {}
    steps = engine.get("steps") or 0
    return {
        "control_ms_per_decode_step": control_ms(run_dir),
        "tokens_per_s": (result.get("metrics") or {}).get("output_token_throughput"),
        "mean_step_ms": 1e3 * engine["busy_s"] / steps if steps and engine.get("busy_s") else None,
        "interpreter_share": (result.get("verdict") or {}).get("interpreter_share"),
        "top_components": components,
        "gpu": {
            key: gpu_time.get(key)
            for key in (
                "busy_share",
                "idle_host_share",
                "idle_no_work_share",
                "idle_host_by_component",
                "window_gpu_idle_fraction",
                "kernels_per_step",
                "launches_per_step",
                "busy_ns_per_step",
                "pairs",
                "unread_pairs",
            )
        },
        "gpu_sentence": ((result.get("verdict") or {}).get("gpu") or {}).get("sentence"),
        "graphs": engine.get("graphs"),
        "nvml": {
            "status": nvml.get("status"),
            "process_memory_mib": _stats_mean(process.get("memory_used_mib")),
            "process_sm_pct": _stats_mean(process.get("sm_utilization_pct")),
            "device_utilization_pct": _stats_mean(nvml.get("utilization_pct")),
        },
    }


def control_ms(run_dir: Path) -> float | None:
    """The median over decode steps of the host time the C twins replace (sampler, scheduler, KV allocator,
    input preparation), from steps.csv: what the twins change, read apart from the forward's own drift."""
    import pandas as pd

    steps = pd.read_csv(run_dir / "steps.csv")
    decode = steps[(steps["prefill_tokens"] == 0) & (steps["decode_tokens"] > 0)]
    if decode.empty:
        return None
    columns = ["sampler_ms", "scheduler_ms", "kv_alloc_ms", "prepare_ms"]
    return float(decode[columns].sum(axis=1).median())


def one_line(entry: dict[str, Any]) -> str:
    """A run's figures in one line: what the note quotes."""
    if entry["exit"] != 0:
        return f"{entry['name']}: exit {entry['exit']}: {' / '.join(entry.get('stderr') or [])}"
    gpu, nvml = entry["gpu"], entry["nvml"]
    waited = sorted((gpu.get("idle_host_by_component") or {}).items(), key=lambda item: -(item[1] or 0))
    top = f"{waited[0][0]} {_pct(waited[0][1])}" if waited else "-"
    return (
        f"{entry['name']}: {_num(entry['tokens_per_s'])} tok/s, step {_num(entry['mean_step_ms'])} ms "
        f"(control {_num3(entry['control_ms_per_decode_step'])} ms), "
        f"interpreter {_pct(entry['interpreter_share'])}; GPU busy {_pct(gpu.get('busy_share'))}, "
        f"host-bound idle {_pct(gpu.get('idle_host_share'))} (top: {top}), "
        f"no work {_pct(gpu.get('idle_no_work_share'))}; launches/step {_num(gpu.get('launches_per_step'))}, "
        f"kernels/step {_num(gpu.get('kernels_per_step'))}; NVML {nvml.get('status')}: process "
        f"{_num(nvml.get('process_memory_mib'))} MiB, SM {_num(nvml.get('process_sm_pct'))}%"
    )


def _pct(value: Any) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, (int, float)) else "-"


def _num(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "-"


class Check:
    """Runs the steps in order and keeps every figure and every failure."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.report: dict[str, Any] = {"runs": [], "failures": []}
        self.started = time.perf_counter()

    def fail(self, what: str) -> None:
        self.report["failures"].append(what)
        say(f"FAILED: {what}")

    def cuda_tests(self) -> None:
        test = "tests/engine/test_on_cuda.py"
        done = child([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test], 240)
        tail = done.stdout.strip().splitlines()[-3:]
        self.report["cuda_tests"] = {"exit": done.returncode, "tail": tail}
        say(f"CUDA tests: exit {done.returncode}: {' / '.join(tail)}")
        if done.returncode != 0 or "skipped" in (tail[-1] if tail else ""):
            self.fail("the CUDA tests (tests/engine/test_on_cuda.py) did not all pass")

    def selftest(self) -> None:
        kept = self.out / "selftest"  # each case's run directory comes back with the archive
        done = cli("selftest", "--quick", "--out", str(kept), timeout=240)
        tail = done.stderr.strip().splitlines()[-1:]
        self.report["selftest"] = {"exit": done.returncode, "tail": tail, "table": done.stdout}
        say(f"selftest --quick: exit {done.returncode} ({self.elapsed():.0f} s): {' / '.join(tail)}")
        say(done.stdout.rstrip())
        if done.returncode != 0:
            self.fail("selftest --quick")

    def greedy(self, graphs: tuple[str, ...]) -> None:
        tokens = {mode: greedy_tokens(self.args.model, self.args.device, mode) for mode in graphs}
        if len(tokens) < 2:
            say("greedy tokens, graphs off vs on: not compared (no graphs off the GPU)")
            return
        same = tokens["off"] == tokens["on"]
        self.report["greedy_identical_graphs_on_off"] = same
        say(
            f"greedy tokens, graphs off vs on: {'identical' if same else 'DIFFERENT'} (8 prompts x 24 tokens)"
        )
        if not same:
            self.fail("greedy tokens differ between graphs off and on")

    def run(self, name: str, scenario: str, graphs: str, native: str) -> dict[str, Any]:
        run_dir = self.out / name
        args = ["run", "-m", self.args.model, "-s", scenario, "--device", self.args.device]
        args += ["--native", native, "-r", str(self.args.requests), "-o", str(run_dir), "--no-report"]
        if self.args.device != "cpu":
            args += ["--graphs", graphs]
        done = cli(*args, timeout=180)
        entry: dict[str, Any] = {
            "name": name,
            "scenario": scenario,
            "graphs_option": graphs,
            "native": native,
        }
        entry["exit"] = done.returncode
        if done.returncode == 0:
            (run_dir / "summary.txt").write_text(done.stdout)
            entry.update(run_figures(run_dir))
        else:
            entry["stderr"] = done.stderr.strip().splitlines()[-3:]
            self.fail(f"run {name} exited {done.returncode}")
        self.report["runs"].append(entry)
        say(one_line(entry))
        return entry

    def native_gain(self, first_none: dict[str, Any]) -> None:
        """Interleaved rounds of none and core,sampler with the first run's graphs setting (on, on a GPU: the
        replayed forward is steady, the eager one was seen to drift 2x between runs): the ratios per round."""
        nones, natives, graphs = [first_none], [], first_none["graphs_option"]
        for round_index in range(self.args.rounds):
            if round_index:
                nones.append(self.run(f"native-none-{round_index + 1}", "concurrency-30", graphs, "none"))
            natives.append(self.run(f"native-on-{round_index + 1}", "concurrency-30", graphs, NATIVE))
        gain: dict[str, Any] = {"twins": NATIVE, "rounds": self.args.rounds, "graphs": graphs}
        for key, better in (("tokens_per_s", 1), ("mean_step_ms", -1), ("control_ms_per_decode_step", -1)):
            ratios = [
                (on[key] / off[key]) ** better
                for off, on in zip(nones, natives, strict=True)
                if on.get(key) and off.get(key)
            ]
            gain[key] = {"ratios": ratios, "median": statistics.median(ratios) if ratios else None}
        self.report["native_gain"] = gain
        say(
            f"--native {NATIVE} vs none, concurrency-30, graphs {graphs}, {self.args.rounds} rounds: "
            + "; ".join(
                f"{label} x{_num3(gain[key]['median'])} ({', '.join(_num3(r) for r in gain[key]['ratios'])})"
                for key, label in (
                    ("tokens_per_s", "tokens/s"),
                    ("mean_step_ms", "mean step faster"),
                    ("control_ms_per_decode_step", "control path faster"),
                )
            )
        )

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def finish(self) -> int:
        self.report["wall_s"] = self.elapsed()
        (self.out / "gpu_check.json").write_text(json.dumps(self.report, indent=1, default=str))
        if self.args.archive:
            with tarfile.open(self.args.archive, "w:gz") as archive:
                archive.add(self.out, arcname=self.out.name)
        failures = self.report["failures"]
        verdict = (
            "every check passed"
            if not failures
            else f"{len(failures)} check(s) FAILED: {'; '.join(failures)}"
        )
        say(f"done in {self.report['wall_s']:.0f} s: {verdict}; figures in {self.out / 'gpu_check.json'}")
        return 1 if failures else 0


def _num3(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else "-"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default="gpu-check", help="folder for the run directories and gpu_check.json"
    )
    parser.add_argument("--requests", type=int, default=60, help="requests per run (default 60)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of none vs core,sampler (default 2)")
    parser.add_argument(
        "--model", default="smollm2-135m", help="the model every step runs (default smollm2-135m)"
    )
    parser.add_argument(
        "--device", default="cuda", help="cuda (the check), or cpu: rehearse the plumbing without a GPU"
    )
    parser.add_argument("--archive", help="also pack the folder into this .tar.gz (to bring it back)")
    args = parser.parse_args()
    if args.requests < 1 or args.rounds < 1:
        parser.error("--requests and --rounds must be at least 1")
    return args


def main() -> int:
    args = parse_args()
    import torch

    if args.device != "cpu" and not torch.cuda.is_available():
        say(f"FAILED: no CUDA device (torch {torch.__version__} sees none); this check needs one")
        return 1
    check = Check(args)
    check.out.mkdir(parents=True, exist_ok=True)
    on_gpu = args.device != "cpu"
    check.report["device"] = torch.cuda.get_device_name(0) if on_gpu else "cpu"
    check.report["torch"] = torch.__version__
    say(f"device {check.report['device']}, torch {torch.__version__}, model {args.model}")
    if on_gpu:
        check.cuda_tests()
    check.selftest()
    graphs = ("off", "on") if on_gpu else ("off",)
    check.greedy(graphs)
    last: dict[str, Any] = {}
    for scenario in SCENARIOS:
        for mode in graphs:
            last[scenario] = check.run(f"{scenario}-graphs-{mode}", scenario, mode, "none")
    check.native_gain(last["concurrency-30"])  # graphs on, on a GPU
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
