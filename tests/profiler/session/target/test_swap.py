"""`--swap sampler` on the host: the server's Python and its vLLM checked before anything starts, and the swap put into a fresh interpreter by the probe against a fake vLLM on disk, switched by the steps' turns and read back; no vLLM needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infer_prof.errors import OptionError, TargetError
from infer_prof.profiler.session.target.inject import SOURCE as PROBE_SOURCE
from infer_prof.profiler.session.target.inject import ProbeSetup
from infer_prof.profiler.session.target.swap import (
    SwapPlan,
    add_swap,
    check_swap,
    installed_in,
    native_library,
    report_swap,
    server_python,
)
from tests.native_paths.support import requires_native

SAMPLER_MODULE = """
import torch

calls = []


class TopKTopPSampler:
    def __init__(self, logprobs_mode="raw_logprobs", use_fp64_gumbel=False):
        self.logprobs_mode = logprobs_mode
        self.use_fp64_gumbel = use_fp64_gumbel
        self.forward = self.forward_cpu

    def forward_cpu(self, logits, generators, k, p):
        calls.append(logits.shape[0])
        return torch.full((logits.shape[0],), -1, dtype=torch.long), None
"""


def fake_vllm(root: Path, version: str = "0.32.0") -> Path:
    """A vllm package with the version files and the sampler module the swap reads."""
    package = root / "vllm"
    ops = package / "v1" / "sample" / "ops"
    ops.mkdir(parents=True)
    for folder in (package, package / "v1", package / "v1" / "sample", ops):
        (folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (package / "_version.py").write_text(f"__version__ = version = {version!r}\n")
    (ops / "topk_topp_sampler.py").write_text(SAMPLER_MODULE)
    return root


def test_the_server_python_is_the_commands_program_or_its_scripts_interpreter(tmp_path: Path) -> None:
    python, assigned = server_python(
        f"env HF_HUB_OFFLINE=1 A=b {sys.executable} -m vllm.entrypoints --port 8101"
    )
    assert python == sys.executable and assigned == {"HF_HUB_OFFLINE": "1", "A": "b"}
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\nprint('serving')\n")
    script.chmod(0o755)
    assert server_python(f"X=1 {script} serve m --port 1")[0] == sys.executable
    with pytest.raises(OptionError, match="cannot tell which Python"):
        server_python("bash -c 'serve --port 1'")


def test_the_check_reads_the_servers_vllm_without_importing_it(tmp_path: Path) -> None:
    known = installed_in(sys.executable, {"PYTHONPATH": str(fake_vllm(tmp_path / "known"))})
    assert known == {
        "version": "0.32.0",
        "parameters": ["self", "logits", "generators", "k", "p"],
        "problem": None,
    }
    other = installed_in(sys.executable, {"PYTHONPATH": str(fake_vllm(tmp_path / "other", "0.99.0"))})
    assert other["version"] == "0.99.0" and "0.99.0 is not one the sampler swap knows" in other["problem"]


@requires_native
def test_an_unknown_vllm_is_refused_on_one_line_before_the_server_starts(tmp_path: Path) -> None:
    fake = fake_vllm(tmp_path, "0.99.0")
    command = f"env PYTHONPATH={fake} {sys.executable} -c 'raise SystemExit(9)' --port 8101"
    with pytest.raises(TargetError) as refused:
        check_swap("sampler", command, probe=True)
    assert "\n" not in str(refused.value) and "no server was started" in str(refused.value)
    with pytest.raises(OptionError, match="the swaps are sampler"):
        check_swap("scheduler", command, probe=True)
    with pytest.raises(OptionError, match="--launch CMD --probe"):
        check_swap("sampler", command, probe=False)


HOST = """
import torch
import work
from vllm.v1.sample.ops import topk_topp_sampler as vllm_sampler

sampler = vllm_sampler.TopKTopPSampler()
logits = torch.randn(3, 300, generator=torch.Generator().manual_seed(0))
p = torch.full((3,), 0.9)
for _ in range(24):
    work.step(lambda: sampler.forward(logits.clone(), {}, None, p))
print(len(vllm_sampler.calls))
"""


@requires_native
def test_the_probe_switches_the_swap_in_by_the_steps_turns(tmp_path: Path) -> None:
    fake = fake_vllm(tmp_path / "site")
    (fake / "work.py").write_text("def step(fn):\n    return fn()\n")
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(PROBE_SOURCE.read_text())
    rows = [{"component": "step", "module": "work", "function": "step"}]
    (folder / "probes.json").write_text(json.dumps({"probes": rows, "switch": "step"}))
    (folder / "switch").write_bytes(b"1")
    setup = ProbeSetup(folder, rows)
    add_swap(setup, SwapPlan("sampler", sys.executable, "0.32.0", native_library()))
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{fake}", "INFER_PROF_PROBE_DIR": str(folder)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(HOST)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["12"]  # vLLM's own function in half the steps: the turns without the swap
    status = json.loads(next(folder.glob("swap-*.json")).read_text())
    assert status["swapped"] and status["rows"]["swapped"] == 36 and status["rows"]["off turn"] == 36
    paths = [int(line.split("\t")[3]) for line in next(folder.glob("swap-*.tsv")).read_text().splitlines()]
    assert paths[:8] == [1, 0, 0, 1, 1, 0, 0, 1]  # ABBA, one step a turn
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = report_swap(run_dir, setup)
    result = json.loads((run_dir / "swap.json").read_text())
    assert result["pairs"] == 12 and result["rows"]["swapped"] == 36
    assert result["tokens_per_s"]["with_swap"]["point"] > 0 and result["step_ms"]["ratio"]["point"] > 0
    assert any("rows by path: swapped 36, off turn 36" in line for line in lines)
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [(entry["kind"], entry["component"]) for entry in ledger] == [("verify", "sampler")]
    assert ledger[0]["predicted"] == pytest.approx(1 - result["predicted_step_ratio"])
    assert ledger[0]["measured"] == pytest.approx(1 - result["step_ms"]["ratio"]["point"])


@requires_native
def test_beside_a_slowdown_the_swap_takes_its_own_turns_and_the_slowdown_predicts_its_gain(
    tmp_path: Path,
) -> None:
    fake = fake_vllm(tmp_path / "site")
    (fake / "work.py").write_text("def step(fn):\n    return fn()\n")
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(PROBE_SOURCE.read_text())
    rows = [{"component": "step", "module": "work", "function": "step"}]
    what_if = {"components": ["sampler"], "levels": [0.5], "turn_steps": 1}
    (folder / "probes.json").write_text(json.dumps({"probes": rows, "switch": "step", "what_if": what_if}))
    (folder / "switch").write_bytes(b"1")
    setup = ProbeSetup(folder, rows)
    add_swap(setup, SwapPlan("sampler", sys.executable, "0.32.0", native_library()))
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{fake}", "INFER_PROF_PROBE_DIR": str(folder)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(HOST).replace("range(24)", "range(64)")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # One cycle: the slowdown's 1 a a 1, then the swap's 1 S S 1; the swap serves only its own S turns.
    assert done.stdout.split() == ["48"]
    paths = [int(line.split("\t")[3]) for line in next(folder.glob("swap-*.tsv")).read_text().splitlines()]
    assert paths[:8] == [1, 1, 1, 1, 1, 0, 0, 1]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    slowdown = {"sampler": {"sensitivity": 0.9, "low": 0.8, "high": 1.0}}
    written = {"scenario": {"name": "chat"}, "target": {"probe": {"what_if": {"components": slowdown}}}}
    (run_dir / "result.json").write_text(json.dumps(written))
    lines = report_swap(run_dir, setup)
    result = json.loads((run_dir / "swap.json").read_text())
    assert result["rows"]["swapped"] == 48 and result["pairs"] >= 8
    saved = result["forward_share"] * (1 - 1 / result["forward_speedup"]["point"])
    beside = result["slowdown_predicted"]
    assert beside["gain"] == pytest.approx(0.9 * saved) and beside["low"] == pytest.approx(0.8 * saved)
    assert any(line.lstrip().startswith("slowdown-predicted for this swap") for line in lines)
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [(entry["kind"], entry["scenario"]) for entry in ledger] == [
        ("verify", "chat"),
        ("slowdown", "chat"),
    ]
    assert ledger[1]["predicted"] == pytest.approx(0.9 * saved)
    assert (
        ledger[0]["measured"]
        == ledger[1]["measured"]
        == pytest.approx(1 - result["step_ms"]["ratio"]["point"])
    )
