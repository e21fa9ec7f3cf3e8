"""A whole `run --launch` session against the fake multi-process server: every Python process sampled (the late child
too), each named and split in target.processes, its stacks in samples-<pid>.txt, and the server gone afterwards;
and the CLI's one line and exit 2 for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.session.target.launch import group_members, launched_server
from infer_prof.profiler.session.target.probe import probe
from infer_prof.profiler.session.target.target_plan import plan_target
from infer_prof.profiler.session.target.target_session import run_target_session
from infer_prof.profiler.session.target.tree import descendants, parents
from infer_prof.scenarios.spec import load_scenario
from tests.profiler.session.target.conftest import FakeServer, alive, fake_command, free_port

ROOT = Path(__file__).resolve().parents[4]

# Short replies at 10 requests/s for ~2.5 s: long enough for py-spy (3 Hz) to sample the child that starts late.
STEADY = """
description = "steady, quick"
seed = 0
num_requests = 24
warmup_requests = 1
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 8 }
[load]
mode = "open-loop"
rate = 10.0
"""


def test_a_launched_run_samples_every_python_process_and_stops_the_server(tmp_path: Path, tokenizer) -> None:  # type: ignore[no-untyped-def]
    scenario = tmp_path / "steady.toml"
    scenario.write_text(STEADY)
    spec = load_scenario(str(scenario))
    port, out = free_port(), tmp_path / "run"
    out.mkdir()
    command = fake_command("--port", str(port), "--late-child-after", "3")
    with launched_server(command, f"http://127.0.0.1:{port}", out / "server.log", timeout_s=60) as server:
        assert server is not None
        plan = plan_target(probe(f"http://127.0.0.1:{port}"), None, "default", launched=server.pid)
        run_target_session(plan, spec, out, tokenizer=tokenizer, profile="default")
        tree = descendants(server.pid, parents())
    assert not group_members(server.pid) and not any(alive(pid) for pid in tree)
    result = read_run(out).result
    processes = {entry["role"]: entry for entry in result.target["processes"]}
    roles = ("shell (starts the server)", "API server", "engine core", "model worker")
    assert set(processes) == set(roles)
    shell, api, engine, late = (processes[role] for role in roles)
    assert not shell["python"] and not shell["sampled"] and shell["not_sampled"] == "not a Python process"
    assert api["listening"] and api["ppid"] == shell["pid"] and engine["ppid"] == api["pid"]
    assert late["late"] and not engine["late"] and late["first_seen_s"] > engine["first_seen_s"]
    for entry in (api, engine, late):
        assert entry["sampled"], entry
        assert (out / entry["samples_file"]).read_text().strip(), entry  # py-spy saw its stacks
        assert entry["split"]["threads"]
        assert (
            entry["mode"] == "native"
        )  # another engine: native stacks, to tell Python from the code it calls
    # The engine core's busy loop is what the run's verdict reads; samples.txt is its stacks.
    assert engine["primary"] and result.target["pid"] == engine["pid"] and engine["busy_samples"] > 0
    assert engine["split"]["engine_thread"]  # its busy loop is an engine-loop thread by what it does
    assert (out / "samples.txt").read_text() == (out / engine["samples_file"]).read_text()
    assert result.metrics["completed"] == 24 and "listening on" in (out / "server.log").read_text()


def test_the_tree_of_a_running_server_is_found_from_a_child_pid_or_its_port() -> None:
    server = FakeServer()
    try:
        info = probe(server.url)
        by_port = plan_target(info, None, "default")
        child = next(pid for pid in descendants(server.pid, parents()) if pid != server.pid)
        by_child = plan_target(info, child, "default")
    finally:
        server.stop()
    assert (by_port.pid, by_port.pid_source) == (server.pid, f"port {server.port}")
    assert (by_child.pid, by_child.pid_source) == (server.pid, "--pid")


@pytest.mark.slow  # three CLI starts (imports of torch and the reports): ~30 s each on a loaded 2-core machine
def test_bad_launch_and_pid_are_one_line_and_exit_2(tmp_path: Path) -> None:
    server = FakeServer()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        cases = (
            (["--launch", f"no-such-server --port {free_port()}"], "the shell found no such command"),
            (
                ["--launch", fake_command("--exit-after", "0", "--port", str(free_port()))],
                "exited with status 3",
            ),
            (["--target", server.url, "--pid", str(sleeper.pid)], "is not a Python process"),
        )
        for index, (args, needle) in enumerate(cases):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "infer_prof.cli",
                    "run",
                    *args,
                    "--out",
                    str(tmp_path / str(index)),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 2, (args, done.stderr)
            errors = [line for line in done.stderr.splitlines() if "error" in line]
            assert len(errors) == 1 and needle in errors[0] and "Traceback" not in done.stderr, done.stderr
            assert errors[0] == done.stderr.strip().splitlines()[-1]
    finally:
        sleeper.kill()
        sleeper.wait()
        server.stop()
