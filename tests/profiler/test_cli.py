"""The CLI as a user meets it: real subprocesses, exit codes that mean something, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.conftest import write_tiny_gguf


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler.cli", *args], capture_output=True, text=True, timeout=timeout)


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
    result = cli("generate", "Hello there", "Count to three", "--model", "synthetic:tiny", "-n", "5", "--json")
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
    assert_user_error(cli("generate", "word " * 5000, "--model", "synthetic:tiny", "--no-chat"), "max_model_len")


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
    assert_user_error(cli("run", "--model", "synthetic:tiny", "--scenario", str(bad), "--out", str(out)), "bad.toml", "rate")
    assert not out.exists()


def test_run_writes_a_complete_run_directory(tmp_path: Path):
    out = tmp_path / "run"
    result = cli("run", "--model", "synthetic:tiny", "--scenario", "edge", "--requests", "3", "--out", str(out), "--no-report")
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
