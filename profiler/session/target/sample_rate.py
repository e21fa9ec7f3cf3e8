"""How fast py-spy samples another engine's server: the rate its verdict's interval needs, held to a CPU budget by the cost of one sample measured on this machine just before the load.

The verdict's interpreter share is a Wilson interval over the engine loop's busy samples (analysis.foreign), read
against the rule's thresholds (analysis.diagnose.THRESHOLDS). How many busy samples resolve it depends on how far
the share sits from a threshold; before the load nothing is known of it, so the rate is sized for the tightest
case worth resolving, a share at half or twice a threshold (PRIOR_FACTOR), within AIM_S of load with the loop
busy LOOP_BUSY of the time (both assumptions, said in the run). What a sample costs is measured, not assumed:
py-spy runs CALIBRATION_S on the server's Python process with the most threads (py-spy reads every thread a
sample), in the run's own stack mode and priority, and its CPU time over its samples is the cost. The rate is
then capped so py-spy's CPU stays within PROCESS_BUDGET of a core per sampled process and MACHINE_BUDGET of the
machine's cores in all, and never above what py-spy delivered in the calibration; it is floored at the fixed rate
runs used before (registry.DEFAULT_RATE_HZ). The deep profile and our own server keep their fixed rates: deep
asks for its own, and our server's spans time its phases, its samples only cross-check them.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...analysis.classify import parse_raw
from ...analysis.diagnose import THRESHOLDS
from ...collectors.registry import DEEP_RATE_HZ, DEFAULT_RATE_HZ
from ...collectors.sampling import SamplingResult, find_py_spy, py_spy_command
from ...rundir.schema import SamplingCalibration, SamplingInRun, TargetSamplingRate
from ...stats import wilson_interval
from ..machine import usable_cpus
from .tree import tree_processes

# High, so that the per-sample cost dominates py-spy's fixed costs; odd, as every rate here.
CALIBRATION_HZ = 97
CALIBRATION_S = 1.0
AIM_S = 60.0  # resolve within the first minute of load: the scenario's length is not known before it runs
LOOP_BUSY = 0.5  # assumed share of the loop's samples that are busy under load (the rest wait for work)
PRIOR_FACTOR = 2.0  # the tightest share worth resolving sits at half or twice a threshold
CONFIDENCE = 0.95  # the verdict's interval
PROCESS_BUDGET = 0.05  # of one core: py-spy's CPU per sampled process
MACHINE_BUDGET = 0.10  # of the machine's usable cores: py-spy's CPU over every sampled process together
FLOOR_HZ = DEFAULT_RATE_HZ
ATTACH_TIMEOUT_S = 10.0
_ATTACHED = "Sampling process"
_SUMMARY = re.compile(r"Samples:\s*(\d+)\s+Errors:\s*(\d+)")

# What set the rate (SampleRate.bound).
NEEDED, BUDGET, DELIVERED, FLOOR, FIXED = "needed", "budget", "delivered", "floor", "fixed"


@dataclass(frozen=True, slots=True)
class Calibration:
    """One short py-spy run on a quiet server: its CPU time over the samples it took."""

    pid: int
    mode: str  # "native" or "nonblocking", as the run samples
    asked_hz: int
    wall_s: float  # from py-spy's attach to the last CPU reading
    samples: int  # of the process: one stack of each of its threads
    errors: int
    cpu_s: float  # py-spy's own CPU over wall_s (its start-up excluded)
    stacks: int = 0  # py-spy's own count ("Samples: N"), one a thread a sample

    @property
    def cost_s(self) -> float:
        """CPU seconds a sample of the process costs (a failed one costs too)."""
        return self.cpu_s / max(1, self.samples + self.errors)

    @property
    def delivered_hz(self) -> float:
        return self.samples / self.wall_s if self.wall_s > 0 else 0.0

    def section(self) -> SamplingCalibration:
        return {
            "pid": self.pid,
            "mode": self.mode,
            "asked_hz": self.asked_hz,
            "wall_s": self.wall_s,
            "samples": self.samples,
            "errors": self.errors,
            "cpu_s": self.cpu_s,
            "cost_ms": self.cost_s * 1e3,
            "delivered_hz": self.delivered_hz,
            "threads": self.stacks / self.samples if self.samples else None,
        }


@dataclass(frozen=True, slots=True)
class Need:
    """The busy samples that resolve the tightest share against its threshold, and the rate that gets them in time."""

    samples: int
    share: float
    threshold: float
    aim_s: float = AIM_S
    loop_busy: float = LOOP_BUSY

    @property
    def hz(self) -> float:
        return self.samples / (self.aim_s * self.loop_busy)

    def seconds_at(self, rate_hz: float) -> float:
        """Load it takes to collect the samples at `rate_hz`, the loop busy as assumed."""
        return self.samples / (rate_hz * self.loop_busy)


@dataclass(frozen=True, slots=True)
class SampleRate:
    """The rate py-spy samples each process of the tree at, what set it, and from which figures."""

    rate_hz: int
    bound: str  # NEEDED, BUDGET, DELIVERED, FLOOR or FIXED
    reason: str  # one sentence: why this rate
    need: Need | None = None
    budget_hz: float | None = None
    budget_cores: float | None = None  # py-spy's CPU allowed per process
    processes: int | None = None
    calibration: Calibration | None = None

    def words(self) -> str:
        """The rate as the run's opening lines say it."""
        return f"py-spy at {self.rate_hz} Hz ({self.reason})"

    def section(
        self, results: Mapping[int, SamplingResult] | None = None, wall_s: float = 0.0
    ) -> TargetSamplingRate:
        """result.json's `target.sampling_rate`: the choice, and what the samplers cost in the run (`results`: each
        pid's SamplingCollector.result(), `wall_s` the load's length)."""
        need = self.need
        return {
            "rate_hz": self.rate_hz,
            "bound": self.bound,
            "reason": self.reason,
            "needed_samples": need.samples if need else None,
            "prior_share": need.share if need else None,
            "threshold": need.threshold if need else None,
            "aim_s": need.aim_s if need else None,
            "loop_busy_assumed": need.loop_busy if need else None,
            "needed_hz": need.hz if need else None,
            "resolve_s": need.seconds_at(self.rate_hz) if need else None,
            "budget_hz": self.budget_hz,
            "budget_cores": self.budget_cores,
            "processes": self.processes,
            "calibration": self.calibration.section() if self.calibration else None,
            "in_run": in_run_cost(results or {}, wall_s),
        }


def samples_to_resolve(
    share: float, threshold: float, *, confidence: float = CONFIDENCE, most: int = 10**7
) -> int:
    """The fewest busy samples whose Wilson interval around `share` leaves `threshold` out (the interval narrows as
    the samples grow, so the first count that clears is found by bisection)."""
    if not 0 < share < 1 or share == threshold:
        raise ValueError(f"share {share} cannot be resolved against {threshold}")

    def clears(samples: int) -> bool:
        interval = wilson_interval(share * samples, samples, confidence=confidence)
        return interval.low > threshold if share > threshold else interval.high < threshold

    low, high = 1, most
    while low < high:
        middle = (low + high) // 2
        if clears(middle):
            high = middle
        else:
            low = middle + 1
    return low


def tightest_need(
    thresholds: tuple[float, ...] = THRESHOLDS,
    *,
    factor: float = PRIOR_FACTOR,
    prior_share: float | None = None,
    aim_s: float = AIM_S,
    loop_busy: float = LOOP_BUSY,
) -> Need:
    """The most busy samples any threshold needs: at `prior_share` when one is known (a previous look), against
    the threshold nearest it; else at `factor` times and 1/`factor` of each threshold."""
    if prior_share is not None:
        threshold = min(thresholds, key=lambda value: abs(math.log(prior_share / value)))
        cases = [(prior_share, threshold)]
    else:
        cases = [(threshold * scale, threshold) for threshold in thresholds for scale in (factor, 1 / factor)]
    share, threshold = max(cases, key=lambda case: samples_to_resolve(*case))
    return Need(samples_to_resolve(share, threshold), share, threshold, aim_s, loop_busy)


def budget_per_process(processes: int, cores: int) -> float:
    """Cores of py-spy CPU each sampled process may take: PROCESS_BUDGET, less where MACHINE_BUDGET over all
    the processes is tighter."""
    return min(PROCESS_BUDGET, MACHINE_BUDGET * cores / max(1, processes))


def choose_rate(need: Need, calibration: Calibration, *, processes: int, cores: int) -> SampleRate:
    """The rate from the need and the measured cost (a pure rule: every figure is given). An odd whole rate, so that
    samples do not fall in step with periodic work (registry.DEFAULT_RATE_HZ)."""
    cores_each = budget_per_process(processes, cores)
    budget_hz = cores_each / calibration.cost_s if calibration.cost_s > 0 else math.inf
    # py-spy could not go faster than it did in the calibration; below the asked rate by more than a sample's
    # jitter it fell behind, and that is its ceiling here.
    delivered = calibration.delivered_hz
    ceiling = min(
        float(calibration.asked_hz), delivered if delivered < 0.9 * calibration.asked_hz else math.inf
    )
    cap = min(budget_hz, ceiling)
    if need.hz <= cap:
        rate = _odd_at_most(math.ceil(need.hz), cap, up=True)
    else:
        rate = _odd_at_most(math.floor(cap), cap, up=False)
    # an odd rate just under the need still falls short of it: then the cap is what bound it
    bound = NEEDED if rate >= need.hz else BUDGET if budget_hz <= ceiling else DELIVERED
    if rate < FLOOR_HZ:
        rate, bound = FLOOR_HZ, FLOOR
    choice = SampleRate(rate, bound, "", need, budget_hz, cores_each, processes, calibration)
    return dataclasses.replace(choice, reason=_reason(choice))


def _odd_at_most(rate: int, cap: float, *, up: bool) -> int:
    """`rate` made odd: one up when that stays within `cap` and `up` allows it, else one down."""
    if rate % 2:
        return rate
    return rate + 1 if up and rate + 1 <= cap else rate - 1


def _reason(choice: SampleRate) -> str:
    need, calibration = choice.need, choice.calibration
    assert need is not None and calibration is not None
    asked = (
        f"{need.samples:,} busy samples resolve a {need.share:.1%} share against {need.threshold:.0%}, "
        f"{need.hz:.0f} Hz over {need.aim_s:.0f} s of load with the loop busy {need.loop_busy:.0%} of it (assumed)"
    )
    count = round(calibration.stacks / calibration.samples) if calibration.samples else 0
    threads = f"{count} thread{'' if count == 1 else 's'}, " if calibration.stacks else ""
    cost = (
        f"{calibration.cost_s * 1e3:.2f} ms of CPU a sample, measured on pid {calibration.pid} "
        f"({calibration.mode}, {threads}{calibration.delivered_hz:.0f} of {calibration.asked_hz} Hz delivered)"
    )
    budget = (
        f"py-spy's CPU budget of {choice.budget_cores or 0:.1%} of a core per process "
        f"({choice.processes} sampled) at {cost}"
    )
    if choice.bound == NEEDED:
        return f"{asked}; within {budget}"
    later = f"; such a share resolves after about {need.seconds_at(choice.rate_hz):,.0f} s of load"
    if choice.bound == BUDGET:
        return f"{asked}; held to {choice.budget_hz:.1f} Hz by {budget}{later}"
    if choice.bound == DELIVERED:
        return f"{asked}; held by what py-spy delivered, {cost}{later}"
    return f"{asked}; the budget allows {choice.budget_hz:.1f} Hz at {cost}, below the {FLOOR_HZ} Hz floor{later}"


def fixed_rate(rate_hz: int, reason: str) -> SampleRate:
    return SampleRate(rate_hz, FIXED, reason)


def decide_rate(root: int | None, *, foreign: bool, profile: str, py_spy: str | None = None) -> SampleRate:
    """The rate for the tree under `root`: calibrated for another engine's server at the default profile, fixed
    otherwise (and when the calibration cannot run, with why)."""
    if root is None or profile == "off":
        return fixed_rate(DEFAULT_RATE_HZ, "no process to sample")
    if profile == "deep":
        return fixed_rate(DEEP_RATE_HZ, "--profile deep's fixed rate")
    if not foreign:
        return fixed_rate(
            DEFAULT_RATE_HZ, "fixed: our server's spans time its phases, samples only cross-check"
        )
    python = [process.pid for process in tree_processes(root) if process.python]
    if not python:
        return fixed_rate(
            DEFAULT_RATE_HZ, f"fixed: no Python process in the tree of pid {root} to calibrate on"
        )
    target = max(python, key=lambda pid: (_thread_count(pid), _process_cpu_s(pid) or 0.0))
    # As the tree's samplers: native stacks, and without them where py-spy cannot unwind (target_session.tree_sampler).
    measured = calibrate(target, native_stacks=True, py_spy=py_spy)
    if isinstance(measured, str):
        measured = calibrate(target, native_stacks=False, py_spy=py_spy)
    if isinstance(measured, str):
        return fixed_rate(DEFAULT_RATE_HZ, f"fixed: the calibration failed ({measured})")
    return choose_rate(tightest_need(), measured, processes=len(python), cores=usable_cpus())


def calibrate(
    pid: int,
    *,
    native_stacks: bool,
    py_spy: str | None = None,
    rate_hz: int = CALIBRATION_HZ,
    seconds: float = CALIBRATION_S,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> Calibration | str:
    """py-spy on `pid` for `seconds` at `rate_hz`, invoked as the run invokes it (nice 19, --idle, raw output), its
    CPU read once it has attached and again at the end: a Calibration, or why none could be made."""
    executable = find_py_spy(py_spy)
    if executable is None:
        return "py-spy is not installed"
    folder = Path(tempfile.mkdtemp(prefix="infer-prof-rate-"))
    log_path = folder / "py-spy.log"
    command = py_spy_command(
        executable,
        pid,
        str(folder / "raw.txt"),
        rate=rate_hz,
        native_stacks=native_stacks,
        idle=True,
        gil=False,
    )
    try:
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "RUST_BACKTRACE": "0"},
                preexec_fn=_lowest_priority,
            )
        try:
            if not _attached(process, log_path, clock, sleep):
                tail = log_path.read_text(errors="replace").strip().splitlines()
                return f"py-spy did not attach to pid {pid}: {tail[-1] if tail else 'no output'}"
            start, cpu_start = clock(), _process_cpu_s(process.pid)
            sleep(seconds)
            end, cpu_end = clock(), _process_cpu_s(process.pid)
            process.send_signal(signal.SIGINT)  # py-spy prints its sample count on Ctrl-C
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        match = _SUMMARY.findall(log_path.read_text(errors="replace"))
        if not match or cpu_start is None or cpu_end is None:
            return "py-spy printed no sample count" if not match else "no /proc to read py-spy's CPU from"
        stacks, errors = (int(value) for value in match[-1])
        samples = _samples_of_process(folder / "raw.txt")
        if not samples:
            return "py-spy wrote no stacks"
        return Calibration(
            pid,
            "native" if native_stacks else "nonblocking",
            rate_hz,
            end - start,
            samples,
            errors,
            cpu_end - cpu_start,
            stacks,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _attached(
    process: subprocess.Popen[bytes],
    log_path: Path,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> bool:
    deadline = clock() + ATTACH_TIMEOUT_S
    while clock() < deadline:
        if process.poll() is not None:
            return False
        if _ATTACHED in log_path.read_text(errors="replace"):
            return True
        sleep(0.02)
    return False


def _samples_of_process(raw: Path) -> int:
    """Samples of the process in py-spy's raw output: with --idle every thread has a stack in each, so the thread
    seen most often was seen in every one (py-spy's own count is of stacks, one a thread)."""
    try:
        text = raw.read_text(errors="replace")
    except OSError:
        return 0
    per_thread: Counter[int | None] = Counter()
    for stack in parse_raw(text):
        per_thread[stack.thread_id] += stack.count
    return max(per_thread.values(), default=0)


def process_samples(result: SamplingResult) -> int:
    """A sampler result's samples of its process (SamplingCollector.result: `threads` by name, each with its thread
    ids): the most any one thread had."""
    threads = (result.get("threads") or {}).values()
    return max(
        (int(entry["samples"]) // max(1, len(entry.get("thread_ids") or [])) for entry in threads), default=0
    )


def in_run_cost(results: Mapping[int, SamplingResult], wall_s: float) -> SamplingInRun | None:
    """What the tree's samplers cost over the load: their CPU (start-up included) over the samples of their
    processes, and over the load's wall time; None when no sampler ran."""
    ran = [result for result in results.values() if result.get("status") == "ok"]
    cpus = [overhead.get("py_spy_cpu_s") if (overhead := result.get("overhead")) else None for result in ran]
    if not ran or any(cpu is None for cpu in cpus):
        return None
    samples = sum(process_samples(result) + int(result.get("errors") or 0) for result in ran)
    cpu_s = float(sum(cpu for cpu in cpus if cpu is not None))
    return {
        "processes": len(ran),
        "samples": samples,
        "cpu_s": cpu_s,
        "cost_ms": cpu_s / samples * 1e3 if samples else None,
        "cores": cpu_s / wall_s if wall_s > 0 else None,
    }


def cost_line(section: TargetSamplingRate | None, wall_s: float) -> str | None:
    """What py-spy cost over the load, against its budget and the calibration (the run's closing line); None when
    no sampler ran. The calibration reads an idle server: under load a sample reads deeper stacks and more threads."""
    in_run = (section or {}).get("in_run")
    if not section or not in_run or not in_run.get("samples") or wall_s <= 0:
        return None
    processes, cores, cost = in_run.get("processes") or 1, in_run.get("cores") or 0.0, in_run.get("cost_ms")
    delivered = (in_run.get("samples") or 0) / processes / wall_s
    line = (
        f"sampling in the run: py-spy took {cores:.1%} of a core over {processes} process{'es' if processes > 1 else ''}"
        f" ({cost or 0:.2f} ms of CPU a sample, start-up included; {delivered:.0f} samples a second of load at"
        f" {section.get('rate_hz')} Hz asked)"
    )
    budget, calibration = section.get("budget_cores"), section.get("calibration")
    if budget is not None:
        line += f"; {'over' if cores / processes > budget else 'within'} its budget of {budget:.1%} a process"
    if calibration and cost and calibration.get("cost_ms"):
        line += f"; a sample cost {cost / calibration['cost_ms']:.1f}x the calibration's on the idle server"
    return line


def _lowest_priority() -> None:
    """As the run's default-profile samplers (sampling.PRIORITIES "low"): a core only when one is free."""
    try:
        os.nice(19)
    except OSError:
        pass


def _thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _process_cpu_s(pid: int) -> float | None:
    """CPU seconds of a live process: to the nanosecond where the kernel keeps each thread's schedstat (a second of
    calibration costs py-spy a few clock ticks), else to the tick from its stat."""
    if Path("/proc/self/schedstat").exists():
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        total_ns = 0
        for task in tasks:
            try:
                total_ns += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended since the listing
        return total_ns / 1e9
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
