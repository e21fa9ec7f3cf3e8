"""`run --launch CMD --probe` against the fake multi-process server: the probe loads in every Python process, times the
engine table's functions inside the engine child, and the run reads back steps, per-step component time, its own
cost by turns on and off, and agreement with the samples; and the CLI refuses --probe without --launch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.session.target.inject import prepare_probe
from infer_prof.profiler.session.target.launch import launched_server
from infer_prof.profiler.session.target.probe import probe
from infer_prof.profiler.session.target.target_plan import plan_target
from infer_prof.profiler.session.target.target_session import run_target_session
from infer_prof.scenarios.spec import load_scenario
from tests.profiler.session.target import fake_engine_loop
from tests.profiler.session.target.conftest import fake_command, free_port
from tests.profiler.session.target.test_run_tree import STEADY

ROOT = Path(__file__).resolve().parents[4]


def test_a_probed_launch_times_the_engines_functions_inside_its_processes(
    tmp_path: Path,
    tokenizer,
    monkeypatch,
) -> None:  # type: ignore[no-untyped-def]
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "fake.toml").write_text(fake_engine_loop.TABLE)
    monkeypatch.setenv("INFER_PROF_ENGINE_TABLES", str(tables))
    scenario = tmp_path / "steady.toml"
    scenario.write_text(STEADY)
    spec = load_scenario(str(scenario))
    port, out = free_port(), tmp_path / "run"
    out.mkdir()
    setup = prepare_probe(out)
    assert {row["function"] for row in setup.probes} >= {"Loop.step", "Loop.schedule", "EngineCore.step"}
    command = fake_command("--port", str(port), "--engine-loop")
    with launched_server(
        command, f"http://127.0.0.1:{port}", out / "server.log", timeout_s=60, env=setup.env()
    ) as server:
        assert server is not None
        plan = plan_target(probe(f"http://127.0.0.1:{port}"), None, "default", launched=server.pid)
        run_target_session(plan, spec, out, tokenizer=tokenizer, profile="default", probe=setup)
    result = read_run(out).result
    section = result.target["probe"]
    engine = next(entry for entry in result.target["processes"] if entry["role"] == "engine core")
    api = next(entry for entry in result.target["processes"] if entry["role"] == "API server")
    # Every Python process of the server loaded it; only the engine child imported the loop it times.
    assert {engine["pid"], api["pid"]} <= set(section["loaded_in"])
    by_pid = {entry["pid"]: entry for entry in section["processes"]}
    assert {"Loop.step", "Loop.schedule"} <= {name.split(":")[1] for name in by_pid[engine["pid"]]["patched"]}
    assert not by_pid[api["pid"]]["records"]
    steps = section["steps"]
    assert steps["pid"] == engine["pid"] and steps["with_probes_on"] >= 20
    # Each step sleeps MODEL_S and busies SCHEDULE_S and SAMPLE_S: the probe's per-step figures hold them.
    components = steps["components"]
    assert set(components) == {"scheduler", "model", "sampler"}
    assert components["model"]["ms_per_step"] >= fake_engine_loop.MODEL_S * 1e3
    assert components["scheduler"]["ms_per_step"] >= fake_engine_loop.SCHEDULE_S * 1e3
    assert steps["mean_ms"] >= sum(entry["ms_per_step"] for entry in components.values())
    assert components["model"]["share"] > components["scheduler"]["share"]
    for entry in components.values():
        assert entry["low"] <= entry["share"] <= entry["high"] and entry["where"] == "engine loop"
    # The steps took turns: they ran with the component probes on and off, and the A/B priced them.
    assert steps["count"] > steps["with_probes_on"]
    cost = section["cost"]
    assert cost["ab"] is not None and cost["ab"]["low"] <= cost["ab"]["point"] <= cost["ab"]["high"]
    # The table names the step's size (Loop.schedule's tokens): only neighbours of about equal size were paired.
    assert (
        cost["matched_by"] == "step sizes within 10%"
        and (out / "probe" / f"sizes-{engine['pid']}.tsv").is_file()
    )
    assert cost["priced"] is not None and 0 < cost["priced"] < 0.05
    assert any("In-process probe" in reason for reason in result.verdict["reasons"])
    assert (out / "probe" / f"spans-{engine['pid']}.tsv").is_file()
    # The report's flame graph has a group per other process, labelled from its own sample_labels-<pid>.csv.
    from infer_prof.reports.run.flamegraph import render_flamegraph
    from infer_prof.reports.rundata import prepare

    groups = prepare(out).threads
    api_group = next(group for group in groups if group.name == f"API server, pid {api['pid']}")
    assert api_group.samples > 0 and (out / f"sample_labels-{api['pid']}.csv").is_file()
    assert {stack.category for stack in api_group.stacks} & {
        "idle",
        "interpreter",
        "lock",
    }  # labelled, not "unclassified"
    assert f"API server, pid {api['pid']}" in str(render_flamegraph(groups))


def test_probe_goes_with_launch() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "infer_prof.cli", "run", "--target", "http://127.0.0.1:9", "--probe"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "infer-prof: error: --probe goes with --launch CMD: the probe is loaded into the server as it starts"
    ]


def test_a_user_tables_probe_rows_are_checked(tmp_path: Path) -> None:
    from infer_prof.errors import TargetError
    from infer_prof.profiler.analysis.engine_tables import load_table

    good = tmp_path / "good.toml"
    good.write_text(fake_engine_loop.TABLE)
    assert load_table(good).probes[0] == ("step", "fake_engine_loop", "Loop.step")
    for bad, words in (
        (['["stepp", "m", "f"]'], "component 'stepp'"),
        (['["step", "m"]'], "three"),
        (['["step", "m-x", "f"]'], "dotted module"),
    ):
        path = tmp_path / "bad.toml"
        path.write_text(f"probes = [{bad[0]}]\n")
        with pytest.raises(TargetError, match=words):
            load_table(path)
