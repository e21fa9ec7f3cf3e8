"""`run --target` against `infer-prof serve` in a subprocess (synthetic:tiny, ephemeral 127.0.0.1 port), and the
server's own process behaviour: the split with the api component, compare and budget on target runs, a --pid
that is not Python, bad inputs, and a graceful SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from infer_prof.errors import OptionError, TargetError
from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.serve.server import ServeOptions, bind
from infer_prof.profiler.session.target.probe import ServerInfo, probe
from infer_prof.profiler.session.target.target_plan import plan_target, prompt_tokenizer
from infer_prof.profiler.session.target.target_session import run_target_session
from infer_prof.scenarios.spec import load_scenario
from tests.engine.conftest import SMOLLM2_MISSING

ROOT = Path(__file__).resolve().parents[4]
CLI = [sys.executable, "-m", "infer_prof.cli"]


def start_server(*extra: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [*CLI, "serve", "--model", "synthetic:tiny", "--port", "0", *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # the model builds first: up to a few seconds on a loaded machine
    assert "listening on http://127.0.0.1:" in line, (
        line,
        process.stderr.read() if process.poll() is not None else "",
    )
    return process, line.split("listening on ")[1].split()[0]


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    from infer_prof.engine.loader import _local_smollm2

    if _local_smollm2() is None:
        pytest.skip(SMOLLM2_MISSING)  # run --target sizes prompts with SmolLM2's tokenizer
    process, url = start_server()
    try:
        yield url
    finally:
        assert stop(process) == 0


# The chat scenario's shape (Poisson arrivals, chat prompts, a sampling mix), quicker: 20 requests/s, short replies.
QUICK_CHAT = """
description = "chat, quick"
seed = 0
chat = true
num_requests = 10
warmup_requests = 1
prompt_tokens = { dist = "normal", mean = 40, std = 10, min = 8, max = 80 }
output_tokens = { dist = "normal", mean = 16, std = 4, min = 4, max = 32 }
[load]
mode = "open-loop"
rate = 20.0
[sampling]
temperature = 0.7
top_p = 0.9
[slo]
ttft_ms = 5000
"""


@pytest.fixture(scope="module")
def quick_chat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scenario") / "quick-chat.toml"
    path.write_text(QUICK_CHAT)
    return path


def target_run(
    url: str,
    out: Path,
    scenario: Path,
    *,
    requests: int = 10,
    pid: int | None = None,
    ours: bool | None = None,
):  # type: ignore[no-untyped-def]
    info = probe(url)
    if ours is not None:
        info.ours, info.pid = ours, None if not ours else info.pid
    spec = load_scenario(str(scenario)).with_overrides(num_requests=requests, duration_s=None, seed=None)
    return run_target_session(
        plan_target(info, pid, "default"),
        spec,
        out,
        tokenizer=prompt_tokenizer("synthetic:tiny"),
        profile="default",
    )


def test_a_served_run_measures_the_api_layer_and_the_client(
    server: str, tmp_path: Path, quick_chat: Path
) -> None:
    # py-spy samples the server at 3 Hz: 10 requests (~2 s) once gave no busy sample of any thread in a full
    # suite run, and with it no samples split; 24 requests give it ~6 s to sample.
    target_run(server, tmp_path / "run", quick_chat, requests=24)
    run = read_run(tmp_path / "run")
    result, target = run.result, run.result.target
    assert target["ours"] and target["server"]["name"] == "infer-prof serve" and target["pid"] is not None
    assert target["split"]["available"] and set(target["split"]["methods"]) == {"spans", "samples"}
    spans = result.breakdown["methods"]["spans"]
    assert spans["components"]["api"] > 0  # the hand-off runs on the engine thread
    assert target["gil"]["spans_off_cpu"]["api_thread"]["span_share"] > 0  # parse, validate, encode
    # Rows are keyed "name (thread id)": threads are never merged by name; each has a role from what it does.
    roles = {row["name"]: row["role"] for row in target["threads"].values()}
    assert roles.get("infer-prof-api") == "api" and "infer-prof-engine" in roles
    assert result.metrics["completed"] == 24 and result.metrics["failed"] == 0
    measured = run.requests[~run.requests["warmup"]]
    assert (measured["ttft_ms"] > 0).all() and (measured["e2e_ms"] >= measured["ttft_ms"]).all()
    # The server counted the same tokens the client did (usage), and its steps came back for the timeline.
    assert (measured["output_tokens"] == [r.sampling["max_tokens"] for r in _measured(quick_chat, 24)]).all()
    assert len(run.steps) > 0 and "model_ms" in run.steps
    client = target["client"]
    assert (
        0 < client["cpu_s"]
        and client["cpu_fraction_of_one_core"] < 1
        and isinstance(client["bottleneck"], bool)
    )


def _measured(scenario: Path, requests: int = 10):  # type: ignore[no-untyped-def]
    spec = load_scenario(str(scenario)).with_overrides(num_requests=requests, duration_s=None, seed=None)
    from infer_prof.scenarios.loadgen import generate_requests

    return [request for request in generate_requests(spec, 2048) if not request.warmup]


def test_a_pid_that_is_not_python_is_refused_before_any_load(
    server: str, tmp_path: Path, quick_chat: Path
) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with pytest.raises(TargetError, match=rf"--pid {sleeper.pid} \(sleep\) is not a Python process"):
            target_run(server, tmp_path / "run", quick_chat, requests=4, pid=sleeper.pid, ours=False)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not (tmp_path / "run" / "result.json").exists()


def test_compare_report_and_budget_work_on_target_runs(server: str, tmp_path: Path, quick_chat: Path) -> None:
    from typer.testing import CliRunner

    from infer_prof.cli.main import app
    from infer_prof.reports.compare.analysis import compare_runs
    from infer_prof.reports.run.html import write_html_report
    from infer_prof.reports.run.terminal import render_summary

    for name in ("before", "after"):
        target_run(server, tmp_path / name, quick_chat, requests=8)
    compared = compare_runs([tmp_path / "before"], [tmp_path / "after"])
    names = {metric.name: metric for metric in compared.metrics}
    assert names["output_token_throughput"].ratio is not None and names["ttft_ms.p50"].ratio is not None
    console = Console(record=True, width=120)
    render_summary(tmp_path / "after", console)
    text = console.export_text()
    assert "Target server" in text and "infer-prof serve" in text
    write_html_report(tmp_path / "after")
    assert "infer-prof serve" in (tmp_path / "after" / "report.html").read_text()
    budget = tmp_path / "budget.toml"
    budget.write_text(
        'name = "served"\nscenario = "chat"\n[[budget]]\nmetric = "completed"\nmin = 8\n'
        '[[budget]]\nmetric = "api_share"\nmax = 0.5\n'
    )
    check = CliRunner().invoke(app, ["budget", "check", str(budget), "--run", str(tmp_path / "after")])
    assert check.exit_code == 0, check.output


def test_bad_target_inputs_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args, needle in (
        (["run", "--target", "http://127.0.0.1:9", "--out", str(tmp_path / "a")], "cannot reach the server"),
        (["run", "--pid", "1"], "go with --target"),
    ):
        done = subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (args, done.stderr)
        assert (
            needle in done.stderr
            and "Traceback" not in done.stderr
            and len(done.stderr.strip().splitlines()) == 1
        )
    # The same checks, from code: each is an InferProfError (the CLI's one line) naming the input.
    with pytest.raises(TargetError, match="not an http"):
        probe("ftp://example")
    with pytest.raises(OptionError, match="--port=70000"):
        ServeOptions(port=70000)
    with pytest.raises(OptionError, match="--pid 999999999: no such process"):
        plan_target(
            ServerInfo("http://x", "m", None, None, "", ours=False, local=True), 999_999_999, "default"
        )
    taken = bind("127.0.0.1", 0)
    try:
        with pytest.raises(OptionError, match="cannot listen there"):
            bind("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()


def test_sigterm_aborts_what_is_in_flight_and_exits_0() -> None:
    process, url = start_server("--shutdown-timeout", "1")
    chunks: list[str] = []

    def read() -> None:
        with httpx.stream(
            "POST",
            f"{url}/v1/completions",
            timeout=60,
            json={"prompt": "go", "max_tokens": 1500, "ignore_eos": True, "stream": True},
        ) as response:
            chunks.extend(line for line in response.iter_lines() if line.startswith("data: "))

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 30
    while not chunks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert chunks, "the stream never started"
    assert stop(process) == 0
    reader.join(30)
    assert chunks[-1] == "data: [DONE]"
    assert json.loads(chunks[-2][len("data: ") :])["choices"][0]["finish_reason"] == "abort"
