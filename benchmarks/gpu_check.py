"""The GPU path checked in one prepared script (under 10 minutes on one GPU): selftest, then real runs with graphs off and on.

Run: python benchmarks/gpu_check.py [--out DIR] [--requests N]. Steps, each printed as it finishes:
  0. the suite's CUDA tests (tests/engine/test_on_cuda.py: GPU vs CPU logits and greedy tokens, graphs
     replaying the eager steps, the Python sampler's tokens on both devices, CUDA event timing);
  1. `infer-prof selftest --quick` (the planted cases, on the CPU path's expectations);
  2. greedy tokens of the engine on the GPU with CUDA graphs off and on, compared token by token;
  3. `infer-prof run --device cuda` on smollm2-135m and synthetic:large x concurrency-30 and edge x
     graphs off and on: tokens/s, the time split's interpreter share and biggest components, the GPU's
     busy / host-bound idle / no-work shares and who the host-bound idle waited on, kernels and
     launches per step, and this process's NVML memory and SM figures.
A summary JSON (every figure above) is written to DIR/gpu_check.json. On a machine without CUDA it
says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = ("smollm2-135m", "synthetic:large")
SCENARIOS = ("concurrency-30", "edge")
GRAPHS = ("off", "on")


def say(message: str) -> None:
    print(message, flush=True)


def cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infer_prof.profiler.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def greedy_tokens(model_name: str, graphs: str) -> list[list[int]]:
    """Greedy outputs of eight prompts on the GPU engine, built the way `run` builds it."""
    from infer_prof.engine.types import SamplingParams
    from infer_prof.profiler.session.builder import build_engine, load_for_options
    from infer_prof.profiler.session.options import EngineOptions

    options = EngineOptions(model=model_name, device="cuda", dtype="auto", graphs=graphs, max_batch=8)
    built = build_engine(load_for_options(options), options)
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    prompts = [f"Question {i}: name a colour and a number." for i in range(8)]
    with built.engine as engine:
        handles = [engine.submit(prompt, params, chat=True) for prompt in prompts]
        return [handle.result(timeout=300).token_ids for handle in handles]


def run_figures(run_dir: Path) -> dict[str, Any]:
    result = json.loads((run_dir / "result.json").read_text())
    spans = ((result.get("breakdown") or {}).get("methods") or {}).get("spans") or {}
    components = sorted((spans.get("components") or {}).items(), key=lambda item: -(item[1] or 0))[:5]
    gpu_time = result.get("gpu_time") or {}
    nvml = (result.get("collectors") or {}).get("gpu") or {}
    return {
        "tokens_per_s": (result.get("metrics") or {}).get("output_token_throughput"),
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
            )
        },
        "gpu_sentence": ((result.get("verdict") or {}).get("gpu") or {}).get("sentence"),
        "graphs": (result.get("engine") or {}).get("graphs"),
        "nvml_status": nvml.get("status"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default="gpu-check", help="folder for the run directories and gpu_check.json"
    )
    parser.add_argument("--requests", type=int, default=60, help="requests per run (default 60)")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        say(json.dumps({"cuda": False, "note": "no CUDA device: nothing to check"}))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    started = time.perf_counter()

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", str(root / "tests" / "engine" / "test_on_cuda.py")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=root,
    )
    report["cuda_tests"] = {"exit": done.returncode, "tail": done.stdout.strip().splitlines()[-3:]}
    say(f"CUDA tests: exit {done.returncode}: {' / '.join(report['cuda_tests']['tail'])}")

    done = cli("selftest", "--quick", timeout=240)
    report["selftest"] = {"exit": done.returncode, "tail": done.stdout.strip().splitlines()[-3:]}
    say(f"selftest --quick: exit {done.returncode} ({time.perf_counter() - started:.0f} s)")

    tokens = {graphs: greedy_tokens("smollm2-135m", graphs) for graphs in GRAPHS}
    same = tokens["off"] == tokens["on"]
    report["greedy_identical_graphs_on_off"] = same
    say(f"greedy tokens, graphs off vs on: {'identical' if same else 'DIFFERENT'} (8 prompts x 24 tokens)")

    report["runs"] = []
    for model in MODELS:
        for scenario in SCENARIOS:
            for graphs in GRAPHS:
                run_dir = out / f"{model.replace(':', '-')}-{scenario}-graphs-{graphs}"
                done = cli(
                    "run",
                    "-m",
                    model,
                    "-s",
                    scenario,
                    "--device",
                    "cuda",
                    "--graphs",
                    graphs,
                    "-r",
                    str(args.requests),
                    "-o",
                    str(run_dir),
                    "--no-report",
                    timeout=240,
                )
                entry: dict[str, Any] = {
                    "model": model,
                    "scenario": scenario,
                    "graphs": graphs,
                    "exit": done.returncode,
                }
                if done.returncode == 0:
                    entry.update(run_figures(run_dir))
                else:
                    entry["stderr"] = done.stderr.strip().splitlines()[-3:]
                report["runs"].append(entry)
                say(json.dumps(entry, default=str))
    report["wall_s"] = time.perf_counter() - started
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))
    say(f"done in {report['wall_s']:.0f} s; figures in {out / 'gpu_check.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
