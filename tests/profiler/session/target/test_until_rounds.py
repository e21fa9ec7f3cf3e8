"""`run --target/--launch --until resolved`: py-spy restarted between rounds keeps every stretch, the rounds draw more
requests and merge into one load, the look's level reaches the verdict, and what has nothing to look at is refused."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from infer_prof.errors import OptionError
from infer_prof.profiler.collectors.sampling import SamplingCollector, find_py_spy
from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.session.target.client import HttpLoad, HttpRecord
from infer_prof.profiler.session.target.launch import launched_server
from infer_prof.profiler.session.target.probe import probe
from infer_prof.profiler.session.target.rounds import (
    Rounds,
    SampledShare,
    check_until_target,
    drive_rounds,
    merged_load,
)
from infer_prof.profiler.session.target.target_plan import plan_target
from infer_prof.profiler.session.target.target_session import run_target_session
from infer_prof.profiler.session.until import Stopper, round_maker
from infer_prof.profiler.stats import spent_confidence
from infer_prof.scenarios.loadgen import RequestSpec, generate_requests
from infer_prof.scenarios.spec import load_scenario
from tests.profiler.session.target.conftest import fake_command, free_port
from tests.profiler.session.target.test_run_tree import STEADY

BUSY = "import time\nwhile True:\n    sum(i * i for i in range(1000))\n"
needs_py_spy = pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed")


@needs_py_spy
def test_a_restarted_sampler_keeps_every_stretch_and_what_it_had_when_the_process_ends() -> None:
    child = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        sampler = SamplingCollector(pid=child.pid, rate=50)
        sampler.start()
        assert sampler.status == "ok", sampler.reason
        time.sleep(0.6)
        sampler.restart()
        first = sampler.result()
        time.sleep(0.6)
        sampler.restart()
        second = sampler.result()
        assert 0 < first["samples"] < second["samples"]
        assert first["raw_text"] in second["raw_text"]  # the first stretch's stacks are still there
        child.kill()
        child.wait()
        sampler.restart()  # the process is gone: nothing to attach to, what was sampled stands
        sampler.stop()
        last = sampler.result()
        assert sampler.status == "ok"
        assert last["samples"] >= second["samples"]
        assert last["overhead"]["py_spy_cpu_s"] is not None
    finally:
        child.kill()
        child.wait()


def load_of(batch: list[RequestSpec], start: int, stopped: bool = False) -> HttpLoad:
    return HttpLoad(
        records=[HttpRecord(request) for request in batch],
        start_ns=start,
        end_ns=start + 1000,
        warmup_ns=7 if start == 0 else 0,
        stopped_early=stopped,
        peak_in_flight=len(batch),
        client_cpu_s=0.5,
        loop_cpu_s=0.25,
        threads=2,
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_rounds_draw_fresh_requests_numbered_on_until_the_look_resolves() -> None:
    spec = load_scenario("chat").with_overrides(num_requests=6)
    requests = generate_requests(spec, 2048)
    verdicts = iter(
        [(None, ["the interpreter share (too few)"]), (SampledShare(0.5, 0.2, 0.8), ["straddles"])]
    )

    def judge(confidence: float):  # type: ignore[no-untyped-def]
        return next(verdicts, (SampledShare(0.5, 0.4, 0.6), []))

    stopper = Stopper(1000.0, judge, clock=FakeClock())
    stopper.start()
    prompted: list[int] = []
    totals: list[int] = []
    more = round_maker(
        spec, 2048, requests, lambda batch: prompted.extend(r.index for r in batch), stopper, totals.append
    )
    driven: list[list[RequestSpec]] = []

    def drive(batch):  # type: ignore[no-untyped-def]
        driven.append(list(batch))
        return load_of(list(batch), start=1000 * len(driven))

    load = drive_rounds(drive, requests, more)
    assert len(driven) == 3 and stopper.stopped_by == "resolved" and len(stopper.looks) == 3
    indices = [record.request.index for record in load.records]
    assert len(indices) == len(set(indices))  # every request its own number
    assert all(not r.warmup for batch in driven[1:] for r in batch)  # warm-up once, in the first round
    assert prompted == [r.index for batch in driven[1:] for r in batch]  # each new round's prompts prepared
    assert totals == [12, 18]  # the progress bar's total grows by a round's measured requests

    # A fresh draw, not the first round again: the seed moved on.
    def drawn(batch: list[RequestSpec]) -> list[tuple[int, int]]:
        return [(r.prompt_tokens, r.max_tokens) for r in batch if not r.warmup]

    assert drawn(driven[1]) != drawn(driven[0]) and drawn(driven[2]) != drawn(driven[1])
    assert (load.start_ns, load.end_ns) == (1000, 4000) and load.warmup_ns == 0
    assert load.client_cpu_s == pytest.approx(1.5) and load.peak_in_flight == max(len(b) for b in driven)


def test_a_round_that_stops_early_ends_the_rounds() -> None:
    rounds = Rounds()
    calls: list[int] = []

    def more(done: int) -> list[RequestSpec]:
        calls.append(done)
        return []

    drive_rounds(lambda batch: load_of(list(batch), 0, stopped=True), [], more, rounds)
    assert calls == [] and len(rounds.loads) == 1  # Ctrl-C or the server's death: no look, no next round
    assert merged_load(rounds.loads) is rounds.loads[0]


@pytest.mark.parametrize(
    ("pid", "ours", "profile", "words"),
    [
        (None, False, "default", "run infer-prof on the server's machine"),
        (123, False, "off", "a profile other than off"),
        (123, True, "default", "infer-prof run --until resolved"),
    ],
)
def test_until_is_refused_where_a_look_has_nothing_to_read(pid, ours, profile, words) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OptionError, match=words) as caught:
        check_until_target(pid, ours, profile)
    assert "\n" not in str(caught.value)
    check_until_target(123, False, "default")  # a foreign server on this machine: looks read its samples


def test_a_launched_server_run_until_resolved_records_its_looks_at_their_level(
    tmp_path: Path, tokenizer
) -> None:  # type: ignore[no-untyped-def]
    scenario = tmp_path / "steady.toml"
    scenario.write_text(STEADY)
    spec = load_scenario(str(scenario))
    port, out = free_port(), tmp_path / "run"
    out.mkdir()
    with launched_server(
        fake_command("--port", str(port)), f"http://127.0.0.1:{port}", out / "server.log", timeout_s=60
    ) as server:
        assert server is not None
        plan = plan_target(probe(f"http://127.0.0.1:{port}"), None, "default", launched=server.pid)
        run_target_session(plan, spec, out, tokenizer=tokenizer, profile="default", until_max_time_s=60.0)
    result = read_run(out).result
    stopping = result.verdict["stopping"]
    interval = result.verdict["interpreter_interval"]
    assert stopping["rule"] == "until resolved" and stopping["stopped_by"] in ("resolved", "time cap")
    assert stopping["rounds"] == stopping["looks"] >= 1
    assert stopping["confidence"] == pytest.approx(spent_confidence(stopping["looks"]))
    assert interval["confidence"] == pytest.approx(
        stopping["confidence"]
    )  # the final interval at the last look's level
    measured = [r for r in read_run(out).requests.itertuples() if not r.warmup]
    assert len(measured) == 24 * stopping["rounds"]  # every round's requests, each once
    if stopping["stopped_by"] == "resolved":
        assert not result.verdict["straddles"]
