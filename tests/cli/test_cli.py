"""The CLI as a user meets it: real subprocesses, exit codes that mean something, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.engine.conftest import write_tiny_gguf


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infer_prof.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_user_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("infer-prof: error:"), result.stderr
    for needle in needles:
        assert needle in result.stderr


def test_help_teaches_the_main_commands():
    result = cli("--help")
    assert result.returncode == 0
    for command in ("run", "generate", "golden", "compare", "budget", "report", "selftest", "doctor"):
        assert command in result.stdout


def test_generate_json_contract():
    result = cli(
        "generate", "Hello there", "Count to three", "--model", "synthetic:tiny", "-n", "5", "--json"
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    prompts, engine = lines[:-1], lines[-1]["engine"]
    assert [line["prompt"] for line in prompts] == ["Hello there", "Count to three"]
    for line in prompts:
        assert {"prompt_token_ids", "token_ids", "text", "finish_reason", "timings"} <= line.keys()
        assert len(line["token_ids"]) <= 5 and line["finish_reason"] in ("stop", "length")
    assert {"steps", "preemptions", "blocks_total", "blocks_free_at_end"} <= engine.keys()
    assert engine["blocks_free_at_end"] == engine["blocks_total"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["generate", "x", "--max-tokens", "0", "--model", "synthetic:tiny"], ["max_tokens"]),
        (["generate", "x", "--max-tokens", "-3", "--model", "synthetic:tiny"], ["max_tokens"]),
        (["generate", "x", "--model", "synthetic:huge"], ["synthetic"]),
        (["generate", "x", "--model", "no-such-model"], ["no-such-model"]),
        (["generate", "x", "--model", "/nonexistent/model.gguf"], ["model.gguf"]),
        (["generate", "x", "--model", "synthetic:tiny", "--temperature", "-1"], ["temperature"]),
        (["generate", "x", "--model", "synthetic:tiny", "--top-p", "1.5"], ["top_p"]),
        (["generate", "x", "--model", "synthetic:tiny", "--native", "gpu"], ["--native"]),
        (["generate", "x", "--model", "synthetic:tiny", "--kv-memory", "lots"], ["--kv-memory"]),
        (["run", "--model", "synthetic:tiny", "--scenario", "no-such-scenario"], ["no-such-scenario"]),
        (["report", "/nonexistent/run"], ["result.json"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needles):
    assert_user_error(cli(*args), *needles)


def test_prompt_longer_than_the_context_is_refused():
    assert_user_error(
        cli("generate", "word " * 5000, "--model", "synthetic:tiny", "--no-chat"),
        "5,001 tokens",
        "context holds 2,048",
        "shorten the prompt",
    )  # refused before the model is built, counted with its tokenizer (preflight.check_prompts_fit)


def test_broken_gguf_files_are_refused(tmp_path: Path):
    not_gguf = tmp_path / "random.gguf"
    not_gguf.write_bytes(b"\x00\x01definitely not a gguf file" * 50)
    assert_user_error(cli("generate", "x", "--model", str(not_gguf)), "random.gguf")
    good = tmp_path / "tiny.gguf"
    write_tiny_gguf(good)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    assert_user_error(cli("generate", "x", "--model", str(truncated)), "truncated.gguf")
    other_arch = tmp_path / "gpt2.gguf"
    write_tiny_gguf(other_arch, arch="gpt2")
    assert_user_error(cli("generate", "x", "--model", str(other_arch)), "gpt2")


def test_malformed_scenario_file_writes_nothing(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text('description = "x"\nnum_requests = 4\n[load]\nmode = "open-loop"\nrate = -2\n')
    out = tmp_path / "run"
    assert_user_error(
        cli("run", "--model", "synthetic:tiny", "--scenario", str(bad), "--out", str(out)), "bad.toml", "rate"
    )
    assert not out.exists()


def test_run_writes_a_complete_run_directory(tmp_path: Path):
    out = tmp_path / "run"
    result = cli(
        "run",
        "--model",
        "synthetic:tiny",
        "--scenario",
        "edge",
        "--requests",
        "3",
        "--out",
        str(out),
        "--no-report",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads((out / "result.json").read_text())
    assert data["schema_version"] == 1 and data["partial"] is False
    assert data["metrics"]["completed"] == 3 and data["metrics"]["failed"] == 0
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms"):
        assert set(data["metrics"][name]) == {"mean", "p50", "p90", "p99"}
    assert data["verdict"]["category"] in ("interpreter", "lock", "allocation", "kernel", "idle")
    assert (out / "requests.csv").exists() and (out / "steps.csv").exists()
    assert "Traceback" not in result.stderr
    # The run's summary starts with the verdict, and `report` regenerates everything from the directory.
    again = cli("report", str(out))
    assert again.returncode == 0, again.stderr
    for name in ("report.html", "report.pdf", "trace.json", "speedscope.json"):
        assert (out / name).stat().st_size > 0


def test_ctrl_c_writes_a_partial_result(tmp_path: Path):
    import signal
    import threading
    import time

    out = tmp_path / "run"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infer_prof.cli",
            "run",
            "--model",
            "synthetic:tiny",
            "--scenario",
            "chat",
            "--requests",
            "40",
            "--out",
            str(out),
            "--no-report",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in process.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if "load started" in line:  # printed (without a terminal) when the first request is submitted
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert ready.wait(timeout=120), "".join(lines)
    time.sleep(4)  # chat submits 2 requests/s: 40 requests take ~20 s, so this lands mid-load
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130, "".join(lines)
    reader.join(timeout=10)
    assert "Traceback" not in "".join(lines)
    data = json.loads((out / "result.json").read_text())
    assert data["partial"] is True and "Ctrl-C" in data["partial_reason"]
    assert data["metrics"]["completed"] < 40
    assert pd.read_csv(out / "requests.csv").shape[0] > 0  # the requests it had sent are all recorded


def test_budget_exit_codes_reach_the_shell(tmp_path: Path):
    from tests.support.run_dirs import make_run_dir

    run = tmp_path / "run"
    make_run_dir(run, seed=1)
    failing = tmp_path / "fail.toml"
    failing.write_text('[[budget]]\nmetric = "metrics.completed"\nmin = 1000000\nlevel = "error"\n')
    warning = tmp_path / "warn.toml"
    warning.write_text('[[budget]]\nmetric = "metrics.completed"\nmin = 1000000\nlevel = "warn"\n')
    junit = tmp_path / "junit.xml"
    result = cli("budget", "check", str(failing), "--run", str(run), "--junit", str(junit))
    assert result.returncode == 1, result.stderr
    assert "metrics.completed" in result.stdout and junit.exists()
    assert cli("budget", "check", str(warning), "--run", str(run)).returncode == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[[budget]]\nmetric = "metrics.completed"\nmin = 1\nlevel = "fatal"\n')
    assert_user_error(cli("budget", "check", str(bad), "--run", str(run)), "level")


def test_doctor_says_whether_deep_sampling_can_run_on_time():
    result = cli("doctor")
    assert result.returncode == 0, result.stderr
    for row in ("py-spy", "realtime sampling", "native sampler", "default model"):
        assert row in result.stdout, result.stdout


def test_engine_options_are_declared_once_and_arrive_as_one_validated_object() -> None:
    import typer
    from typer.testing import CliRunner

    from infer_prof.cli.options import engine_options
    from infer_prof.profiler.session.options import EngineOptions

    toy = typer.Typer()
    seen: list[tuple[int, EngineOptions]] = []

    @toy.command()
    @engine_options(without=("native",))
    def command(count: int = 1, *, options: EngineOptions) -> None:
        seen.append((count, options))

    runner = CliRunner()
    result = runner.invoke(
        toy, ["--count", "3", "--model", "synthetic:tiny", "--kv-memory", "1MiB", "--max-batch", "4"]
    )
    assert result.exit_code == 0, result.output
    count, options = seen[-1]
    assert count == 3 and options.model == "synthetic:tiny" and options.max_batch == 4
    assert options.kv_memory_bytes == 2**20 and options.native == frozenset()  # left out: its default
    assert runner.invoke(toy, ["--native", "all"]).exit_code == 2  # not an option of this command
