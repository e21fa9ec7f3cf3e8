"""infer_prof.engine.thread_governor: one torch thread while our threads wait for CPUs, all of them once the machine is quiet."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from infer_prof.engine import thread_governor as tg
from infer_prof.engine.thread_governor import CpuReading, ThreadGovernor

ROOT = Path(__file__).resolve().parents[2]
WINDOW_NS = int(tg.WINDOW_S * 1e9)


class FakeMachine:
    """/proc as a script: each window adds the given run-queue wait, the CPU use of other processes
    (`others_cores`) and of our own threads besides the engine's (`own_cores`: an OpenMP worker, clients)."""

    def __init__(self) -> None:
        self.now = 0
        self.busy = self.wait = self.engine = self.process = 0
        self.set_calls: list[int] = []

    def window(
        self,
        own_wait_cores: float = 0.0,
        others_cores: float = 0.0,
        engine_cores: float = 1.0,
        own_cores: float = 0.0,
    ) -> None:
        self.now += WINDOW_NS
        self.wait += int(own_wait_cores * WINDOW_NS)
        self.engine += int(engine_cores * WINDOW_NS)
        self.process += int((engine_cores + own_cores) * WINDOW_NS)
        self.busy += int((others_cores + engine_cores + own_cores) * WINDOW_NS)

    def read(self) -> CpuReading:
        return CpuReading(self.now, self.busy, self.wait, self.engine, self.process)

    def governor(self, threads: int = 2) -> ThreadGovernor:
        return ThreadGovernor(threads, self.set_calls.append, read=self.read, clock=lambda: self.now)


def run(machine: FakeMachine, governor: ThreadGovernor, windows: list[dict[str, float]]) -> list[int]:
    """The thread count after each window."""
    governor.tick()  # the first reading
    counts = []
    for window in windows:
        machine.window(**window)
        governor.tick()
        counts.append(governor.current)
    return counts


def test_a_quiet_machine_keeps_every_thread() -> None:
    machine = FakeMachine()
    governor = machine.governor()
    assert run(machine, governor, [{"own_wait_cores": 0.02}] * 10) == [2] * 10
    assert machine.set_calls == [] and governor.record()["switches"] == 0


def test_waiting_for_cpus_lowers_to_one_thread_and_a_quiet_spell_restores_it() -> None:
    machine = FakeMachine()
    governor = machine.governor()
    busy = {"own_wait_cores": 0.6, "others_cores": 1.0}
    quiet = {"others_cores": 0.05}
    counts = run(machine, governor, [busy, busy, busy, quiet, quiet, quiet, quiet, quiet])
    # Down at the first busy window; up only after UP_WINDOWS quiet windows in a row.
    assert counts == [1, 1, 1, 1, 1, 1, 2, 2]
    assert machine.set_calls == [1, 2]
    record = governor.record()
    assert record["switches"] == 2 and record["threads_at_end"] == 2
    # Lowered at the end of the first busy window, raised at the end of the fourth quiet one: 2 + 4 windows.
    assert record["one_thread_s"] == (2 + tg.UP_WINDOWS) * tg.WINDOW_S
    assert (
        record["watched_s"] == 8 * tg.WINDOW_S
    )  # the whole life it watched, which the lowered time is part of


def test_our_own_threads_waiting_on_a_quiet_machine_keep_every_thread() -> None:
    # An in-process load's clients wait behind our spinning OpenMP worker: the wait is ours, not a neighbour's.
    machine = FakeMachine()
    governor = machine.governor()
    ours = {"own_wait_cores": 0.5, "own_cores": 0.9, "others_cores": 0.05}
    assert run(machine, governor, [ours] * 10) == [2] * 10 and machine.set_calls == []
    # The same wait beside a neighbour's busy loop lowers the count.
    assert run(machine, governor, [{**ours, "others_cores": 0.7}]) == [1]


def test_a_short_lull_does_not_bounce_the_count() -> None:
    machine = FakeMachine()
    governor = machine.governor()
    busy, quiet = {"own_wait_cores": 0.6, "others_cores": 1.0}, {"others_cores": 0.0}
    counts = run(
        machine, governor, [busy] + [quiet] * (tg.UP_WINDOWS - 1) + [busy] + [quiet] * (tg.UP_WINDOWS - 1)
    )
    assert set(counts) == {1} and machine.set_calls == [1]


def test_the_engine_threads_own_cpu_is_not_counted_as_other_work() -> None:
    machine = FakeMachine()
    governor = machine.governor()
    windows = [{"own_wait_cores": 0.6, "others_cores": 1.0}] + [
        {"engine_cores": 1.0, "others_cores": 0.1}
    ] * tg.UP_WINDOWS
    assert run(machine, governor, windows)[-1] == 2


def test_reads_at_most_once_a_window() -> None:
    machine = FakeMachine()
    reads = []
    governor = ThreadGovernor(
        2, machine.set_calls.append, read=lambda: reads.append(1) or machine.read(), clock=lambda: machine.now
    )
    for _ in range(5):
        governor.tick()
    assert len(reads) == 1


def test_close_gives_the_threads_back_and_one_thread_has_nothing_to_govern() -> None:
    machine = FakeMachine()
    governor = machine.governor()
    run(machine, governor, [{"own_wait_cores": 1.0, "others_cores": 1.0}])
    governor.close()
    assert machine.set_calls == [1, 2] and governor.current == 2
    single = machine.governor(threads=1)
    run(machine, single, [{"own_wait_cores": 1.0}])
    assert machine.set_calls == [1, 2]


def test_a_proc_that_stops_answering_stops_the_governor() -> None:
    calls = []

    def broken() -> CpuReading:
        calls.append(1)
        raise OSError("gone")

    governor = ThreadGovernor(2, lambda n: None, read=broken, clock=time.monotonic_ns)
    governor.tick()
    governor.tick()
    assert len(calls) == 1 and governor.current == 2


def test_the_real_proc_readings_move_forward() -> None:
    first = tg.read_cpu()
    sum(i * i for i in range(300_000))  # some CPU on this thread
    second = tg.read_cpu()
    assert second.wall_ns > first.wall_ns and second.engine_cpu_ns > first.engine_cpu_ns
    assert second.process_cpu_ns >= first.process_cpu_ns + (second.engine_cpu_ns - first.engine_cpu_ns) // 2
    assert second.machine_busy_ns >= first.machine_busy_ns and second.own_wait_ns >= first.own_wait_ns


def test_an_engine_lowers_its_own_threads_and_gives_them_back_when_it_stops() -> None:
    # In a fresh process (torch's thread count is per process), with thresholds that lower at the first look.
    code = (
        "import threading, torch\n"
        "import infer_prof.engine.thread_governor as tg\n"
        "from infer_prof.engine.types import SamplingParams\n"
        "from tests.engine.test_engine import make_engine\n"
        "tg.DOWN_WAIT, tg.DOWN_OTHERS, tg.WINDOW_S, tg.UP_WINDOWS = -1.0, -1.0, 0.0, 10**9\n"
        "torch.set_num_threads(2)\n"
        "seen = []\n"
        "eng = make_engine(on_step=lambda record: seen.append(torch.get_num_threads()))\n"
        "with eng:\n"
        "    eng.submit([5, 6, 7], SamplingParams(max_tokens=8)).result(timeout=60)\n"
        "later = []\n"
        "thread = threading.Thread(target=lambda: later.append(torch.get_num_threads())); thread.start(); thread.join()\n"
        "print(seen[0], seen[-1], later[0], eng.threads.record()['switches'])\n"
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "INFER_PROF_OMP_POLICY")
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # The first step ran on 2 threads (one look sets the baseline), later ones on 1; a thread started after
    # the engine stopped gets 2 again.
    assert out.stdout.split() == ["2", "1", "2", "2"]
