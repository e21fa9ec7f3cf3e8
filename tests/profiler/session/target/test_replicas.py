"""A router in front of two replica servers on this machine (fake_replicas.py): both replicas found (through the router's
connections, or named with --replica), each one's process sampled and its engine loop split, and the balance said:
a round robin is balanced, a 3:1 router names the busier replica. Bad --replica input is one line before any load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infer_prof.errors import OptionError, TargetError
from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.rundir.schema import TargetReplica
from infer_prof.profiler.session.target.probe import probe
from infer_prof.profiler.session.target.replica_section import cpu_balance
from infer_prof.profiler.session.target.replicas import check_replicas
from infer_prof.profiler.session.target.sample_rate import fixed_rate
from infer_prof.profiler.session.target.target_plan import plan_target
from infer_prof.profiler.session.target.target_session import run_target_session
from infer_prof.profiler.session.target.tree import descendants, parents
from infer_prof.scenarios.spec import load_scenario
from tests.profiler.session.target import fake_replicas
from tests.profiler.session.target.conftest import free_port

FAKE = Path(__file__).with_name("fake_replicas.py")
# 60 short requests at 20/s: each replica's loop works ~20-40% of the load, and a fair router's spread over 60
# requests (+-13 points of a 50% share) leaves a 3:1 router's 75% outside it.
LOAD = """
description = "60 short requests at 20/s"
seed = 0
num_requests = 60
warmup_requests = 1
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 8 }
[load]
mode = "open-loop"
rate = 20.0
"""


class Server:
    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FAKE), *args], stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "listening on" in line, line
        self.url = line.split("listening on ")[1].strip()
        self.netloc = self.url.removeprefix("http://")
        self.pid = self.process.pid

    def stop(self) -> None:
        os.killpg(self.pid, signal.SIGKILL)  # its spawned replicas too
        self.process.wait(timeout=10)


@pytest.fixture
def replicas() -> Iterator[list[Server]]:
    started = [Server(), Server()]
    try:
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "fake-replicas.toml").write_text(fake_replicas.TABLE)
    monkeypatch.setenv("INFER_PROF_ENGINE_TABLES", str(folder))


def profile_router(
    replicas: list[Server],
    weights: str,
    out: Path,
    tokenizer: Any,
    *,
    named: bool,
    router: Server | None = None,
) -> Any:
    router = router or Server("--backends", ",".join(server.url for server in replicas), "--weights", weights)
    try:
        scenario = out.parent / "load.toml"
        scenario.write_text(LOAD)
        out.mkdir()
        given = check_replicas([server.url for server in replicas], router.url) if named else None
        run_target_session(
            plan_target(probe(router.url), None, "default"),
            load_scenario(str(scenario)),
            out,
            tokenizer=tokenizer,
            profile="default",
            sample_rate=fixed_rate(20, "the test's rate"),
            replicas=given,
        )
    finally:
        router.stop()
    return read_run(out).result


def test_a_round_robin_s_replicas_are_found_through_its_connections_and_balanced(
    replicas: list[Server], tables: None, tmp_path: Path, tokenizer: Any
) -> None:
    result = profile_router(replicas, "1,1", tmp_path / "run", tokenizer, named=False)
    section = result.target["replicas"]
    assert section["source"] == "the router's connections" and section["requests"] == 60
    entries = {entry["name"]: entry for entry in section["replicas"]}
    assert set(entries) == {server.netloc for server in replicas}
    for server in replicas:
        entry = entries[server.netloc]
        assert entry["pids"] == [server.pid] and entry["engine_pid"] == server.pid, entry
        assert entry["engine_role"] == "engine loop" and entry["busy_samples"] > 0
        interpreter = entry["interpreter"]
        assert 0 < interpreter["low"] <= interpreter["share"] <= interpreter["high"]  # its loop runs Python
        assert entry["split"]["interpreter"] == interpreter["share"] and entry["rule"]
        assert entry["cpu_s"] > 0 and entry["found_s"] >= 0
        assert "engine_step" in (tmp_path / "run" / f"samples-{server.pid}.txt").read_text()
    assert section["balanced"] is True and section["busiest"] is None
    assert "balanced (every share within a random router's 95% spread" in section["lines"][0]


@pytest.mark.slow  # a second router run (~10 s on a loaded 2-core machine)
def test_a_3_to_1_router_names_the_busier_replica(
    replicas: list[Server], tables: None, tmp_path: Path, tokenizer: Any
) -> None:
    result = profile_router(replicas, "3,1", tmp_path / "run", tokenizer, named=True)
    section = result.target["replicas"]
    assert section["source"] == "--replica"
    assert [entry["found_s"] for entry in section["replicas"]] == [0.0, 0.0]  # sampled from the start
    assert section["balanced"] is False
    assert (section["busiest"], section["idlest"]) == (replicas[0].netloc, replicas[1].netloc)
    assert f"not balanced: {replicas[0].netloc} did" in section["lines"][0]


def test_replicas_inside_the_router_s_own_tree_are_read_from_its_samples(
    tables: None, tmp_path: Path, tokenizer: Any
) -> None:
    router = Server("--spawn", "2")
    children = [pid for pid in descendants(router.pid, parents()) if pid != router.pid]
    result = profile_router([], "", tmp_path / "run", tokenizer, named=False, router=router)
    section = result.target["replicas"]
    assert sorted(entry["engine_pid"] for entry in section["replicas"]) == sorted(children)
    for entry in section["replicas"]:
        assert (
            entry["sampled_with_router"]
            and entry["pids"] == [entry["engine_pid"]]
            and entry["busy_samples"] > 0
        )
    tree = {row["pid"] for row in result.target["processes"]}
    assert set(children) <= tree  # sampled once, as processes of the router's tree
    assert section["balanced"] is True


def entry(name: str, cpu_s: float | None) -> TargetReplica:
    return {"name": name, "cpu_s": cpu_s}


def test_the_balance_is_judged_against_a_fair_router_s_spread() -> None:
    even = cpu_balance([entry("a", 1.0), entry("b", 1.1)], requests=60)
    assert even is not None and even.balanced and round(even.spread, 3) == 0.127
    uneven = cpu_balance([entry("a", 3.0), entry("b", 1.0)], requests=60)
    assert uneven is not None and not uneven.balanced and (uneven.busiest, uneven.idlest) == ("a", "b")
    assert "not balanced: a did 75% of the work and b 25%" in uneven.line
    few = cpu_balance([entry("a", 3.0), entry("b", 1.0)], requests=8)  # 8 requests: 3:1 is within chance
    assert few is not None and few.balanced
    assert cpu_balance([entry("a", 1.0)], requests=60) is None
    assert cpu_balance([entry("a", 1.0), entry("b", None)], requests=60) is None
    assert cpu_balance([entry("a", 1.0), entry("b", 1.0)], requests=0) is None


def test_bad_replicas_are_refused_in_one_line_before_the_load(replicas: list[Server]) -> None:
    router = "http://127.0.0.1:9"
    cases: list[tuple[str, type[Exception], str]] = [
        ("http://127.0.0.1:notaport", TargetError, "--replica"),
        (router, OptionError, "is the --target itself"),
        ("http://10.255.255.1:8000", TargetError, "not on this machine"),
        (f"http://127.0.0.1:{free_port()}", TargetError, "cannot reach the server"),
    ]
    for url, kind, words in cases:
        with pytest.raises(kind, match=words) as caught:
            check_replicas([url], router)
        assert "\n" not in str(caught.value) and str(caught.value).startswith("--replica"), caught.value
    with pytest.raises(OptionError, match="given twice"):
        check_replicas([replicas[0].url, replicas[0].url + "/v1"], router)
    found = check_replicas([server.url for server in replicas], router)
    assert [(one.url, one.root) for one in found] == [(server.url, server.pid) for server in replicas]


def test_the_cli_refuses_a_replica_that_does_not_answer_before_anything_starts(tmp_path: Path) -> None:
    from tests.cli.test_cli import assert_user_error, cli

    silent = f"http://127.0.0.1:{free_port()}"
    done = cli("run", "--target", "http://127.0.0.1:9", "--replica", silent, "--out", str(tmp_path / "a"))
    assert_user_error(done, f"--replica {silent}: cannot reach the server")
    assert not (tmp_path / "a").exists()  # refused before a run directory is made
