"""A GPU run's device timeline in every face: the headline's sentence, the GPU table in the terminal and the HTML."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from infer_prof.profiler.analysis.diagnose import gpu_verdict
from infer_prof.profiler.rundir.results import read_run
from infer_prof.reports.run import summary
from infer_prof.reports.run.html import render_html
from infer_prof.reports.run.terminal import render_summary
from infer_prof.reports.rundata import prepare

GPU_TIME = {
    "device": "cuda:0",
    "pairs": 600,
    "steps": 300,
    "device_busy_ns": 6e8,
    "busy_ns_per_step": 2e6,
    "window_ns": 1e9,
    "busy_share": 0.6,
    "idle_host_share": 0.35,
    "idle_no_work_share": 0.05,
    "idle_host_by_component": {"sampler": 0.5, "scheduler": 0.3, "between_steps": 0.2},
    "window_gpu_idle_fraction": 0.1,
    "kernels_per_step": 412.0,
    "launches_per_step": 415.0,
    "nvml": {
        "status": "ok",
        "process": {
            "pid": 7,
            "samples": 20,
            "memory_used_mib": {"mean": 1210.5, "p50": 1200.0, "max": 1536.0},
        },
        "utilization_pct": {"mean": 41.5, "p50": 40.0, "max": 77.0},
    },
}


def _gpu_run(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "gpu-run"
    shutil.copytree(run_dir, copy)
    path = copy / "result.json"
    data = json.loads(path.read_text())
    data["gpu_time"] = GPU_TIME
    data["verdict"]["gpu"] = gpu_verdict(GPU_TIME)
    path.write_text(json.dumps(data))
    return copy


def test_the_gpu_verdict_applies_the_rule_to_host_bound_idle_time() -> None:
    verdict = gpu_verdict(GPU_TIME)
    assert verdict["rule"] == "a native rewrite pays"  # 35% >= 30%
    assert verdict["sentence"] == (
        "The GPU waits for the host 35.0% of the time (a native rewrite pays); of that, "
        "50% is the sampler and 30% the scheduler; it had no work 5.0% of the time."
    )
    assert gpu_verdict({**GPU_TIME, "idle_host_share": 0.005})["rule"] == "stay in Python"
    assert gpu_verdict({})["rule"] is None


def test_terminal_and_html_show_the_gpu_split(run_dir: Path, tmp_path: Path) -> None:
    gpu_dir = _gpu_run(run_dir, tmp_path)
    console = Console(file=io.StringIO(), width=100, no_color=True)
    render_summary(gpu_dir, console)
    short = " ".join(console.file.getvalue().split())
    assert "The GPU waits for the host 35.0% of the time" in short
    assert "GPU: busy" in short and "waiting for the host 35.0% (most for the sampler)" in short
    console = Console(file=io.StringIO(), width=100, no_color=True)
    render_summary(gpu_dir, console, verbose=True)
    text = " ".join(console.file.getvalue().split())
    assert "GPU time" in text and "idle, waiting for the host" in text and "of the wait: sampler" in text
    assert "launches per step" in text and "415" in text
    assert "this process's device memory, mean / max (NVML) 1,210.5 MiB / 1,536 MiB" in text
    assert "this process's SM time, mean (NVML) not reported" in text  # the driver gave no SM samples
    assert "whole device utilization, mean (NVML) 41.5 %" in text
    html = render_html(prepare(read_run(gpu_dir)))
    assert "The GPU&#39;s time" in html or "The GPU's time" in html
    assert "idle, waiting for the host" in html


def test_nvml_that_did_not_run_is_one_row_with_its_reason() -> None:
    rows = summary.nvml_rows({"status": "skipped", "reason": "nvidia-ml-py (pynvml) is not installed"})
    assert rows == [["NVML", "skipped: nvidia-ml-py (pynvml) is not installed"]]


def test_a_cpu_run_has_no_gpu_table(run_dir: Path) -> None:
    assert summary.gpu_table(read_run(run_dir).result) is None


def test_the_trace_has_a_gpu_lane_of_device_work_and_the_gaps_between(run_dir: Path, tmp_path: Path) -> None:
    from infer_prof.reports.exports.trace import GPU_TID, write_chrome_trace

    gpu_dir = _gpu_run(run_dir, tmp_path)
    steps = read_run(gpu_dir).steps.head(2)
    rows = []
    for step in steps.itertuples():  # the model's work from 20% to 70% of each step, a copy right after
        length = int(step.end_ns) - int(step.start_ns)
        model_start, model_end = int(step.start_ns) + length // 5, int(step.start_ns) + 7 * length // 10
        rows += [
            (int(step.step), "model", model_start, model_end),
            (int(step.step), "d2h", model_end, model_end),
        ]
    lines = ["step,span,start_ns,end_ns", *(",".join(map(str, row)) for row in rows)]
    (gpu_dir / "gpu_timeline.csv").write_text("\n".join(lines) + "\n")
    trace = json.loads(write_chrome_trace(gpu_dir).read_text())
    lane = [event for event in trace["traceEvents"] if event.get("tid") == GPU_TID and event["ph"] == "X"]
    first = [event for event in lane if event["args"]["step"] == int(steps.iloc[0]["step"])]
    assert [event["name"] for event in first] == [
        "idle: waiting for the host",
        "model (device)",
        "d2h (device)",
        "idle: waiting for the host",
    ]
    length_us = (int(steps.iloc[0]["end_ns"]) - int(steps.iloc[0]["start_ns"])) / 1e3
    assert sum(event["dur"] for event in first) == pytest.approx(
        length_us, abs=0.01
    )  # the lane tiles the step


def test_a_broken_gpu_timeline_is_one_report_error(run_dir: Path, tmp_path: Path) -> None:
    from infer_prof.errors import ReportError
    from infer_prof.reports.exports.trace import write_chrome_trace

    gpu_dir = _gpu_run(run_dir, tmp_path)
    (gpu_dir / "gpu_timeline.csv").write_text("step,span,start_ns,end_ns\n0,model,500,100\n")
    with pytest.raises(ReportError, match="gpu_timeline.csv: row 2 ends before it starts"):
        write_chrome_trace(gpu_dir)
