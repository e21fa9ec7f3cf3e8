"""Span probe that infer-prof puts first on a launched server's PYTHONPATH to time the functions in probes.json."""

# This file is copied alone into a folder of its own, so it imports nothing of infer-prof, only the standard
# library of Python 3.9 to 3.13. Python imports it at start-up in every process of the server's tree, so it
# must never raise into its host: each failure is caught and listed in this process's status file instead.
#
# Layout of INFER_PROF_PROBE_DIR (the probe is active only when it holds probes.json):
#   probes.json         {"probes": [{"component", "module", "function", "size"?}, ...], "switch": "step"?},
#                       read here; "size" names an attribute of the function's return value that counts a
#                       step's work (vLLM's SchedulerOutput.total_num_scheduled_tokens): read on every call,
#                       on or off, so the in-run A/B can pair steps of about equal size
#   switch              optional, 1 byte: b"0" turns component probes off, anything else on; rewrite it in
#                       place (not by os.replace): the probe keeps the file it mapped at start-up. With
#                       "switch": "step", each outermost call of a step probe writes it itself, in ABBA
#                       turns (1, 0, 0, 1, ...), so neighbouring steps pair on with off for the in-run A/B
#   probe-<pid>.json    written here: what was patched, missing, skipped, pending; cost_ns; errors
#   spans-<pid>.tsv     appended here: thread_id, probe_index, start_ns, end_ns, on (perf_counter_ns)
#   sizes-<pid>.tsv     appended here: at_ns (perf_counter_ns at return), size; from "size" probes only
#
# Slowdown experiments (`run --what-if`, Coz's virtual speedup): probes.json's optional "what_if" object,
# {"components": [...], "levels": [...], "turn_steps": N}, makes every outermost call of a named component (sync
# functions only; not one inside another call of it) add a busy loop of `level` x that call's own duration after
# it returns: CPU work that holds the GIL the way the component's own Python does. Each (component, level) is one experiment with a switch byte of its own
# (b"a" + its number); the step probes then turn the switch through 1 X X 1 per experiment (ABBA, N steps a
# turn), the component probes stay on throughout, and junctions 1 | 1 are the A/A. Files, written only then:
#   delays-<pid>.tsv    thread_id, probe_index, call start_ns, call end_ns, delay start_ns, delay end_ns,
#                       requested_ns, switch byte: one line per delayed call
#   turns-<pid>.tsv     at_ns, switch byte: the turn each outermost step took, written just before it runs
#
# Levels scaled to a component's share ("what_if"'s optional "scale": {"measure_steps", "skip_steps",
# "target_share", "max_level"}, as the built-in engine's slowdown.level_scale): a delay of half or all of a call
# that takes 2% of a step is inside the step's own noise. The switch then starts at b"." (probes on, nothing
# delayed or tallied, until a step runs); the steps first take measure_steps undelayed turns (b"1"), in which each
# process tallies its delayed components' outermost calls and the stepping process its outermost steps after the
# first skip_steps; just before the first experiment's byte, the stepping process writes measured.json ({"pid",
# "steps", "skipped", "step_ns", "from_ns", "to_ns"}), and each process, at its component's first call under that
# byte, sets the scale from its calls inside [from_ns, to_ns): target_share / (its share of the step x the top
# level), at least 1, with no level past max_level. The scale and what it came from go to probe-<pid>.json.

from __future__ import annotations

import atexit
import functools
import importlib.machinery
import importlib.util
import itertools
import json
import mmap
import os
import sys
import threading
import time
import types

TYPE_CHECKING = False  # typing costs an import at every start-up of every process; mypy reads the name
if TYPE_CHECKING:
    from collections.abc import Callable, Generator
    from typing import Any

ENV = "INFER_PROF_PROBE_DIR"
STEP = "step"  # the yardstick component: it records whatever the switch flag says
MARK = "__infer_prof_probe__"  # on every wrapper, holding its probe index: nothing is wrapped twice
FLUSH_S = 0.25
MAX_PENDING = 1_000_000  # records held between flushes; beyond, new ones are dropped and counted
MAX_ERRORS = 50
COST_CALLS = 10_000  # x 3 runs x (wrapped + bare), paid at every start-up: few enough to stay short there
_OFF = ord("0")  # the switch byte that turns component probes off; any other byte, or no file, is on
_TURNS = b"1001"  # the step switch's ABBA order, one step a turn
SWITCHED = "mapped, switched by the steps"  # the switch's state when the step probes write it
_LINE = "%d\t%d\t%d\t%d\t%d\n"
_SIZE_LINE = "%d\t%d\n"
_DELAY_LINE = "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n"
_ON = ord("1")  # a slowdown run's turn without delay
_FIRST_CODE = ord("a")  # experiment i's switch byte is _FIRST_CODE + i
# A scaled slowdown run's switch before its first step: probes on, nothing delayed or tallied.
_IDLE = ord(".")
MEASURED = "measured.json"  # the stepping process's tally of the measuring steps, for every process's scales
MAX_EXPERIMENTS = 26
CALIBRATE_NS = 20_000  # the busy loop is calibrated on delays of this size, 200 times (~4 ms)

# This process's unflushed records (thread_id, probe_index, start_ns, end_ns, on). Wrappers hold its bound
# append, so the flusher drains it in place rather than swapping in a new list.
_records: list[tuple[int, int, int, int, bool]] = []
_sizes: list[tuple[int, int]] = []  # (at_ns, size) from the "size" probes, drained the same way
_delays: list[tuple[int, ...]] = []  # the delayed calls (delays-<pid>.tsv's columns), drained the same way
_turn_log: list[tuple[int, int]] = []  # (at_ns, switch byte) of every step in a slowdown run
_probe: _Probe | None = None
# Each thread's native id, looked up once: get_native_id() is a system call, too dear for every call.
_thread_ids = threading.local()


class _Spec:
    """One entry of probes.json."""

    __slots__ = ("component", "function", "module", "size")

    def __init__(self, component: str, module: str, function: str, size: str | None = None) -> None:
        self.component = component
        self.module = module
        self.function = function
        self.size = size


def _read_specs(path: str) -> tuple[list[_Spec | None], bool, list[str]]:
    """The probes in file order (None for an invalid entry, so later indices keep their place), whether the
    steps switch the component probes, and the errors."""
    with open(path, "rb") as fh:
        doc = json.load(fh)
    entries = doc.get("probes") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError('probes.json holds no "probes" list')
    specs: list[_Spec | None] = []
    errors = []
    for index, entry in enumerate(entries):
        try:
            specs.append(_spec(entry))
        except ValueError as exc:
            specs.append(None)
            errors.append(f"probes.json: probe {index}: {exc}")
    return specs, doc.get("switch") == "step", errors


def _spec(entry: object) -> _Spec:
    if not isinstance(entry, dict):
        raise ValueError("not an object")
    fields = [entry.get(key) for key in ("component", "module", "function")]
    if not all(isinstance(field, str) and field for field in fields):
        raise ValueError("component, module and function must be non-empty strings")
    component, module, function = (str(field) for field in fields)
    if "" in function.split("."):
        raise ValueError(f"function {function!r} is not a qualname")
    size = entry.get("size")
    if size is not None and not (isinstance(size, str) and size.isidentifier()):
        raise ValueError(f"size {size!r} is not an attribute name")
    return _Spec(component, module, function, size)


class _WhatIf:
    """probes.json's "what_if": the experiments (component, level) in order, and the steps a turn lasts."""

    __slots__ = ("experiments", "max_level", "measure_steps", "skip_steps", "target_share", "turn_steps")

    def __init__(self, doc: Any) -> None:
        if not isinstance(doc, dict):
            raise ValueError('"what_if" is not an object')
        components, levels, steps = doc.get("components"), doc.get("levels"), doc.get("turn_steps", 1)
        if not (isinstance(components, list) and components and all(isinstance(c, str) for c in components)):
            raise ValueError('"what_if": "components" must be a non-empty list of names')
        if not (
            isinstance(levels, list) and levels and all(type(v) in (int, float) and v > 0 for v in levels)
        ):
            raise ValueError('"what_if": "levels" must be a non-empty list of positive fractions')
        if not (type(steps) is int and steps >= 1):
            raise ValueError('"what_if": "turn_steps" must be a positive integer')
        self.experiments = [(str(c), float(v)) for c in components for v in levels][:MAX_EXPERIMENTS]
        self.turn_steps = steps
        self.measure_steps, self.target_share, self.max_level = 0, 0.0, 0.0  # no "scale": fixed levels
        self.skip_steps = 0
        scale = doc.get("scale")
        if scale is not None:
            if not isinstance(scale, dict):
                raise ValueError('"what_if": "scale" is not an object')
            measure, skip = scale.get("measure_steps"), scale.get("skip_steps", 0)
            target, top = scale.get("target_share"), scale.get("max_level")
            if not (isinstance(measure, int) and isinstance(skip, int) and 0 <= skip < measure):
                raise ValueError(
                    '"what_if": "scale": "measure_steps" must be a positive integer above skip_steps'
                )
            if not (
                isinstance(target, (int, float)) and isinstance(top, (int, float)) and 0 < target <= 1 < top
            ):
                raise ValueError('"what_if": "scale": "target_share" must be in (0, 1], "max_level" above 1')
            self.measure_steps, self.skip_steps = measure, skip
            self.target_share, self.max_level = float(target), float(top)

    def sequence(self, after: list[int] | None = None) -> Any:
        """The switch bytes the steps take: the measuring steps (undelayed) once, then the experiments' turns and
        `after` (a swap's) in a cycle."""
        return itertools.chain([_ON] * self.measure_steps, itertools.cycle(self.turns() + (after or [])))

    def turns(self) -> list[int]:
        """The switch bytes the steps take in turn: 1 X X 1 per experiment X, each for turn_steps steps."""
        order: list[int] = []
        for number in range(len(self.experiments)):
            code = _FIRST_CODE + number
            for state in (_ON, code, code, _ON):
                order.extend([state] * self.turn_steps)
        return order

    def fractions(self, component: str) -> list[float]:
        """Per switch byte, the delay as a fraction of a call of `component` (0 where it is not delayed)."""
        table = [0.0] * 256
        for number, (name, level) in enumerate(self.experiments):
            if name == component:
                table[_FIRST_CODE + number] = level
        return table


class _StepTally:
    """The stepping process's outermost steps while the levels' scales are measured, published once for all.

    The first `skip` steps are left out: a server's first step pays for its start (llama.cpp's first eval pages
    its weights in from the mapped file), and one such step would outweigh the rest. Every process's components
    are tallied over the same window, from the first step counted (from_ns) to the publication (to_ns): the
    probe's clock (perf_counter_ns, the system's monotonic clock) is one across the server's processes."""

    __slots__ = ("directory", "from_ns", "open", "seen", "skip", "step_ns", "steps")

    def __init__(self, directory: str, measuring: bool, skip: int = 0) -> None:
        self.directory = directory
        self.open = measuring  # until the first experiment's byte: steps are tallied while open
        self.skip = skip
        self.seen = 0
        self.from_ns: int | None = None
        self.step_ns = 0
        self.steps = 0

    def add(self, start_ns: int, end_ns: int) -> None:
        self.seen += 1
        if self.seen <= self.skip:
            return
        if self.from_ns is None:
            self.from_ns = start_ns
        self.step_ns += end_ns - start_ns
        self.steps += 1

    def publish(self) -> None:
        """measured.json, replaced atomically, before the switch takes the first delayed byte: a process that
        sees that byte finds the file. Failures stay silent here (the host's step must go on); a process that
        finds no file keeps its levels unscaled and says why."""
        self.open = False
        try:
            path = os.path.join(self.directory, MEASURED)
            temporary = os.path.join(self.directory, f".{MEASURED}.{os.getpid()}.tmp")
            with open(temporary, "w") as fh:
                json.dump(
                    {
                        "pid": os.getpid(),
                        "steps": self.steps,
                        "skipped": min(self.seen, self.skip),
                        "step_ns": self.step_ns,
                        "from_ns": self.from_ns,
                        "to_ns": time.perf_counter_ns(),
                    },
                    fh,
                )
            os.replace(temporary, path)
        except Exception:
            pass


class _Scale:
    """One delayed component's levels in this process: tallied over the measuring steps, then scaled once.

    `table` (switch byte -> fraction of a call) is what the delaying wrappers index; it is scaled in place."""

    __slots__ = (
        "base",
        "calls",
        "capped",
        "component",
        "decided",
        "directory",
        "done",
        "measured",
        "own_ns",
        "scale",
        "settings",
        "share",
        "table",
        "tallied",
        "why",
    )

    def __init__(
        self,
        component: str,
        fractions: list[float],
        settings: _WhatIf,
        directory: str,
        decided: Callable[[], None],
    ) -> None:
        self.component = component
        self.decided = decided  # told once the scale is set, so the status file says it
        self.base = list(fractions)
        self.table = fractions
        self.settings = settings
        self.directory = directory
        self.tallied: list[tuple[int, int]] = []  # (start_ns, duration_ns) of its outermost undelayed calls
        self.own_ns = 0  # those of them inside the stepping process's window, once decided
        self.calls = 0
        self.done = not settings.measure_steps  # fixed levels: nothing to measure
        self.scale = 1.0
        self.share: float | None = None
        self.capped = False
        self.measured: dict[str, Any] | None = None
        self.why: str | None = None if settings.measure_steps else "fixed levels (no scale asked for)"

    def tally(self, start_ns: int, duration_ns: int) -> None:
        if len(self.tallied) < MAX_PENDING:
            self.tallied.append((start_ns, duration_ns))

    def decide(self) -> None:
        """The scale, from this process's tally and the stepping process's measured.json; 1 when either is empty."""
        self.done = True
        try:
            self._decide()
        finally:
            self.decided()

    def _decide(self) -> None:
        try:
            with open(os.path.join(self.directory, MEASURED), "rb") as fh:
                measured = json.load(fh)
            step_ns = int(measured["step_ns"])
            first, last = measured.get("from_ns"), measured.get("to_ns")
            self.measured = measured
        except Exception as exc:
            self.why = f"no tally of the measuring steps ({type(exc).__name__}): levels left unscaled"
            return
        inside = [
            duration
            for start, duration in self.tallied
            if (first is None or start >= first) and (last is None or start < last)
        ]
        self.own_ns, self.calls = sum(inside), len(inside)
        self.tallied = []
        if step_ns <= 0 or not self.own_ns:
            self.why = f"no call of {self.component} in the measuring steps: levels left unscaled"
            return
        self.share = self.own_ns / step_ns
        top = max(self.base)
        wanted, ceiling = self.settings.target_share / (self.share * top), self.settings.max_level / top
        self.scale = max(1.0, min(wanted, ceiling))
        self.capped = wanted > ceiling and ceiling > 1.0
        self.table[:] = [fraction * self.scale for fraction in self.base]

    def status(self) -> dict[str, Any]:
        measured = self.measured or {}
        return {
            "scale": self.scale,
            "share": self.share,
            "capped": self.capped,
            "own_ms": self.own_ns / 1e6,
            "calls": self.calls,
            "steps": measured.get("steps"),
            "skipped": measured.get("skipped"),
            "step_ms": measured["step_ns"] / 1e6 if type(measured.get("step_ns")) is int else None,
            "stepping_pid": measured.get("pid"),
            "why": self.why,
        }


def _read_what_if(path: str) -> _WhatIf | None:
    with open(path, "rb") as fh:
        doc = json.load(fh)
    found = doc.get("what_if") if isinstance(doc, dict) else None
    return None if found is None else _WhatIf(found)


def _spin(until: int, clock: Callable[[], int]) -> int:
    """Busy until the clock reads `until` (holding the GIL as Python work does); the clock at the end."""
    now = clock()
    while now < until:
        now = clock()
    return now


def _calibrate(clock: Callable[[], int]) -> int:
    """What a delay overshoots by (the last clock reads and the loop's exit), median of 200: taken off each."""
    overshoots = []
    for _ in range(200):
        began = clock()
        done = _spin(began + CALIBRATE_NS, clock)
        overshoots.append(done - began - CALIBRATE_NS)
    return max(0, sorted(overshoots)[100])


def _open_switch(directory: str, writable: bool) -> tuple[Any, str]:
    """The switch byte's holder (indexed by every wrapper call) and how it was found; mapped shared and
    writable when the steps switch it, so every process of the tree sees a step's turn at once."""
    path = os.path.join(directory, "switch")
    try:
        fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
    except FileNotFoundError:
        return b"1", "absent"
    except PermissionError:
        if not writable:
            raise
        held, _state = _open_switch(directory, False)
        return held, "mapped read-only"  # the steps cannot switch it: the probes stay on
    try:
        if writable:
            return mmap.mmap(fd, 1, access=mmap.ACCESS_WRITE), SWITCHED
        return mmap.mmap(fd, 1, access=mmap.ACCESS_READ), "mapped"
    finally:
        os.close(fd)  # the mapping stays valid without the descriptor


def _sync_wrapper(
    func: Callable[..., Any],
    index: int,
    always: bool,
    sink: list[Any],
    switch: Any,
    drop: Callable[[], None],
) -> Callable[..., Any]:
    """One span per call, also when the call raises; the hot path, so everything it needs is a local."""
    append = sink.append
    clock = time.perf_counter_ns
    ids = _thread_ids
    off = _OFF
    cap = MAX_PENDING

    @functools.wraps(func)
    def probe(*args: Any, **kwargs: Any) -> Any:
        on = switch[0] != off
        if not (on or always):
            return func(*args, **kwargs)
        start = clock()
        try:
            return func(*args, **kwargs)
        finally:
            end = clock()
            try:
                thread_id = ids.native
            except AttributeError:
                thread_id = ids.native = threading.get_native_id()
            if len(sink) < cap:
                append((thread_id, index, start, end, on))
            else:
                drop()

    setattr(probe, MARK, index)
    return probe


def _delaying_wrapper(
    func: Callable[..., Any],
    index: int,
    sink: list[Any],
    switch: Any,
    drop: Callable[[], None],
    scale: _Scale,
    overshoot_ns: int,
    nesting: Any,
) -> Callable[..., Any]:
    """_sync_wrapper's span, then the switch's delay for this component: scale.table[switch byte] x the call's
    own duration, busy; a wrapper of its own so that a probe without a delay keeps _sync_wrapper's path.

    Only the component's outermost call on a thread is delayed (`nesting`, one per component, counts how deep
    its calls are): an engine's table may name a function and one it calls (vLLM's sample_tokens and _sample),
    and delaying both would add the inner call's delay twice, once of its own and once inside the outer's.
    Until its scale is set, an outermost call in an undelayed turn is tallied, and the first under any other
    byte sets it."""
    append = sink.append
    note = _delays.append
    clock = time.perf_counter_ns
    ids = _thread_ids
    off = _OFF
    undelayed = _ON
    idle = _IDLE
    cap = MAX_PENDING
    spin = _spin
    fractions = scale.table  # scaled in place by scale.decide()

    @functools.wraps(func)
    def probe(*args: Any, **kwargs: Any) -> Any:
        state = switch[0]
        if state == off:
            return func(*args, **kwargs)
        depth = getattr(nesting, "level", 0)
        nesting.level = depth + 1
        start = clock()
        try:
            return func(*args, **kwargs)
        finally:
            end = clock()
            nesting.level = depth
            try:
                thread_id = ids.native
            except AttributeError:
                thread_id = ids.native = threading.get_native_id()
            if len(sink) < cap:
                append((thread_id, index, start, end, True))
                if not (depth or scale.done):
                    if state == undelayed:
                        scale.tally(start, end - start)
                    elif state != idle:
                        scale.decide()
                fraction = fractions[state]
                if fraction and not depth:
                    requested = int((end - start) * fraction)
                    began = clock()
                    done = spin(began + requested - overshoot_ns, clock)
                    note((thread_id, index, start, end, began, done, requested, state))
            else:
                drop()

    setattr(probe, MARK, index)
    return probe


def _turning(
    timed: Callable[..., Any],
    func: Callable[..., Any],
    index: int,
    switch: Any,
    turns: Any,
    tally: _StepTally,
) -> Callable[..., Any]:
    """A step probe of a slowdown run: as _switching, from the experiments' turns, and it logs each turn; while
    the levels' scales are measured it tallies its outermost steps, and publishes them before the first
    delayed turn."""
    depth = _step_depth
    log = _turn_log.append
    clock = time.perf_counter_ns
    undelayed = _ON

    @functools.wraps(func)
    def probe(*args: Any, **kwargs: Any) -> Any:
        level = getattr(depth, "level", 0)
        measuring = False
        if level == 0:
            state = next(turns)
            if tally.open:
                if state == undelayed:
                    measuring = True
                else:
                    tally.publish()  # before the byte: whoever sees it finds the tally
            switch[0] = state
            if len(_turn_log) < MAX_PENDING:
                log((clock(), state))
        depth.level = level + 1
        start = clock() if measuring else 0
        try:
            return timed(*args, **kwargs)
        finally:
            depth.level = level
            if measuring:
                tally.add(start, clock())

    setattr(probe, MARK, index)
    return probe


def _switching(
    timed: Callable[..., Any], func: Callable[..., Any], index: int, switch: Any
) -> Callable[..., Any]:
    """A step probe (`timed`) that first takes the switch's next turn, on each outermost call.

    A step nested in another (a table naming both a step and what it calls) keeps its caller's turn.
    """
    turns = _turns
    depth = _step_depth

    @functools.wraps(func)
    def probe(*args: Any, **kwargs: Any) -> Any:
        level = getattr(depth, "level", 0)
        if level == 0:
            switch[0] = next(turns)
        depth.level = level + 1
        try:
            return timed(*args, **kwargs)
        finally:
            depth.level = level

    setattr(probe, MARK, index)
    return probe


def _sizing(
    timed: Callable[..., Any], func: Callable[..., Any], index: int, attribute: str
) -> Callable[..., Any]:
    """A probe (`timed`) that also keeps the size its call returned (`attribute` of the result), on or off:
    one clock read and one append per call, outside the timed span, so both turns of the A/B pay it alike."""
    append = _sizes.append
    clock = time.perf_counter_ns

    @functools.wraps(func)
    def probe(*args: Any, **kwargs: Any) -> Any:
        result = timed(*args, **kwargs)
        size = getattr(result, attribute, None)
        if type(size) is int and len(_sizes) < MAX_PENDING:
            append((clock(), size))
        return result

    setattr(probe, MARK, index)
    return probe


# One ABBA cycle per process, shared by its step probes (an engine names more than one kind of step), and
# how many step probes each thread is inside: all of them, not one per wrapper.
_turns = itertools.cycle(_TURNS)
_step_depth = threading.local()


def _coroutine_wrapper(
    func: Callable[..., Any],
    index: int,
    always: bool,
    sink: list[Any],
    switch: Any,
    drop: Callable[[], None],
) -> Callable[..., Any]:
    """One span per slice of the coroutine's run, so the time it spends suspended in awaits is not counted."""

    @functools.wraps(func)
    async def probe(*args: Any, **kwargs: Any) -> Any:
        coro = func(*args, **kwargs)
        if type(coro) is not types.CoroutineType or not (always or switch[0] != _OFF):
            return await coro  # off, or an awaitable that is no native coroutine: straight through
        return await _Slices(coro, index, always, sink, switch, drop)

    setattr(probe, MARK, index)
    return probe


class _Slices:
    """Awaitable that drives a coroutine's __await__ iterator by hand, timing each resumption."""

    __slots__ = ("_always", "_switch", "_coro", "_drop", "_index", "_sink")

    def __init__(
        self, coro: Any, index: int, always: bool, sink: list[Any], switch: Any, drop: Callable[[], None]
    ) -> None:
        self._coro = coro
        self._index = index
        self._always = always
        self._sink = sink
        self._switch = switch
        self._drop = drop

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._coro.__await__()
        clock = time.perf_counter_ns
        value: Any = None
        error: BaseException | None = None
        while True:
            on = self._switch[0] != _OFF
            start = clock()
            try:
                try:
                    yielded = steps.send(value) if error is None else steps.throw(error)
                finally:
                    if on or self._always:
                        self._record(start, clock(), on)
            except StopIteration as stop:  # the coroutine returned: so does the await
                return stop.value
            value = error = None
            try:
                value = yield yielded
            except GeneratorExit:  # close(): close the coroutine too, so its finally blocks run
                steps.close()
                raise
            except BaseException as exc:  # throw(), e.g. a task's cancellation: pass it into the coroutine
                error = exc

    def _record(self, start: int, end: int, on: bool) -> None:
        if len(self._sink) < MAX_PENDING:
            self._sink.append((_native_id(), self._index, start, end, on))
        else:
            self._drop()


def _native_id() -> int:
    try:
        native: int = _thread_ids.native
    except AttributeError:
        native = _thread_ids.native = threading.get_native_id()
    return native


def _locate(module: types.ModuleType, qualname: str) -> tuple[object, Any, str]:
    """(named owner, object whose __dict__ defines the attribute, attribute name) for a qualname in a module.

    Raises LookupError when something is not there (missing) and TypeError when it cannot be patched (skipped).
    """
    parts = qualname.split(".")
    owner: Any = module
    for part in parts[:-1]:
        try:
            owner = getattr(owner, part)
        except AttributeError:
            raise LookupError(f"{part!r} not found") from None
    name = parts[-1]
    if isinstance(owner, type):
        for klass in owner.__mro__:  # an inherited method is patched on the class that defines it
            if name in vars(klass):
                return owner, klass, name
        raise LookupError(f"{owner.__qualname__} has no attribute {name!r}")
    if isinstance(owner, types.ModuleType):
        if name in vars(owner):
            return owner, owner, name
        raise LookupError(f"module {owner.__name__} has no attribute {name!r}")
    raise TypeError(f"{'.'.join(parts[:-1])} is a {type(owner).__name__}, not a class or module")


def _unwrap(raw: Any) -> tuple[Any, Callable[[Any], Any] | None]:
    """The function inside a staticmethod/classmethod, and the wrapper type to put back around the probe."""
    if isinstance(raw, (staticmethod, classmethod)):
        return raw.__func__, type(raw)
    return raw, None


def _kind(func: Any) -> tuple[str | None, str]:
    """("sync" or "coroutine", "") when the probe can time it, else (None, why not)."""
    import inspect  # only processes that import a probed module pay for inspect

    if not inspect.isfunction(func):
        return None, f"not a Python function ({type(func).__name__})"
    if inspect.isasyncgenfunction(func):
        return None, "async generator function"
    if inspect.isgeneratorfunction(func):
        return None, "generator function (a span would time only its creation)"
    if inspect.iscoroutinefunction(func):
        return "coroutine", ""
    return "sync", ""


class _Finder:
    """First on sys.meta_path: for a probed module, wraps the loader the other finders return."""

    def __init__(self, probe: _Probe) -> None:
        self._probe = probe
        self._wanted = frozenset(probe.modules)
        self._busy = threading.local()  # names this thread is finding: another finder may import through us

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self._wanted:
            return None
        busy = self._busy.__dict__.setdefault("names", set())
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            spec = self._find_elsewhere(fullname, path, target)
        finally:
            busy.discard(fullname)
        if spec is not None:
            self._probe.attempt(lambda: _hook_loader(spec, self._probe), f"hooking the import of {fullname}")
        return spec

    def _find_elsewhere(self, fullname: str, path: Any, target: Any) -> Any:
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or isinstance(finder, _Finder) or find is None:
                continue
            try:
                spec = find(fullname, path, target)
            except Exception:
                return None  # the import system asks that finder again after us, and the host sees its error
            if spec is not None:
                return spec
        return None


def _hook_loader(spec: Any, probe: _Probe) -> None:
    loader = spec.loader
    if loader is None or isinstance(loader, _Loader) or not hasattr(loader, "exec_module"):
        return  # no loader, or a legacy load_module one: left alone (the probes stay pending)
    if spec.origin is None and spec.submodule_search_locations is not None:
        return  # a namespace package: no code, and the import system treats its loader specially
    spec.loader = _Loader(loader, probe, spec.name)


class _Loader:
    """Stands in for a probed module's loader until the module executes, then patches its probed functions."""

    def __init__(self, inner: Any, probe: _Probe, name: str) -> None:
        self._inner = inner
        self._probe = probe
        self._name = name

    def __getattr__(self, attr: str) -> Any:  # get_source, is_package, get_resource_reader...
        return getattr(object.__getattribute__(self, "_inner"), attr)

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._inner, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._restore(module)
        self._inner.exec_module(module)  # its errors are the host's own, raised unchanged
        self._probe.on_import(self._name, module)

    def _restore(self, module: types.ModuleType) -> None:
        """Hand the module its real loader back before its code runs: it may look at __loader__ or __spec__."""
        try:
            if vars(module).get("__loader__") is self:
                module.__loader__ = self._inner
            spec = vars(module).get("__spec__")
            if spec is not None and spec.loader is self:
                spec.loader = self._inner
        except Exception as exc:
            self._probe.error(f"restoring the loader of {self._name}", exc)


class _Probe:
    """This process's probe: the probes, what became of each, the flusher and the status file."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.pid = os.getpid()
        self.specs: list[_Spec | None] = []
        self.modules: dict[str, list[int]] = {}  # module name -> indices of its probes
        self.pending: set[int] = set()
        self.patched: dict[int, dict[str, Any]] = {}
        self.missing: dict[int, dict[str, Any]] = {}
        self.skipped: dict[int, dict[str, Any]] = {}
        self.errors: list[str] = []
        self.dropped = 0  # approximate under threads: the drop path is rare and need not be exact
        self.cost_ns: int | None = None
        self.switch: Any = b"1"
        self.switch_state = "absent"
        self.switch_by_step = False
        self.what_if: _WhatIf | None = None
        self.what_if_turns: Any = None  # the experiments' cycle of switch bytes, shared by the step probes
        self.swap: Any = None  # `--swap`: the module of this folder that replaces an engine's function
        self.overshoot_ns: int | None = None
        self.delayed: list[int] = []
        self.nesting: dict[str, Any] = {}  # per delayed component, its calls' depth on each thread
        self.scales: dict[str, _Scale] = {}  # per delayed component, its levels' scale in this process
        self.step_tally = _StepTally(directory, False)  # the measuring steps' tally, if this process steps
        self.not_delayed: list[dict[str, Any]] = []  # named by what_if, but only sync functions are delayed
        self.lock = threading.RLock()  # probe state and the status file; re-entrant: patching may import
        self.flush_lock = threading.Lock()
        self.flusher_pid: int | None = None
        self.status_due = False

    # -- failures ------------------------------------------------------------------------------------------

    def error(self, where: str, exc: BaseException) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"{where}: {type(exc).__name__}: {exc}")

    def attempt(self, step: Callable[[], object], where: str) -> None:
        try:
            step()
        except Exception as exc:
            self.error(where, exc)

    # -- set-up --------------------------------------------------------------------------------------------

    def load(self) -> None:
        self.specs, self.switch_by_step, errors = _read_specs(os.path.join(self.directory, "probes.json"))
        self.errors.extend(errors)
        for index, spec in enumerate(self.specs):
            if spec is None:
                self._settle(index, self.skipped, {"function": None, "why": "invalid entry in probes.json"})
            else:
                self.modules.setdefault(spec.module, []).append(index)
                self.pending.add(index)

    def open_switch(self) -> None:
        self.switch_state = "error"  # until mapped: a broken switch file leaves the probes on
        self.switch, self.switch_state = _open_switch(self.directory, self.switch_by_step)

    def load_swap(self) -> None:
        """probes.json's "swap": its module (a file of this folder, e.g. vllm_sampler_swap.py) replaces a function
        when that function's module is imported; the steps then turn the switch through its turns (with and
        without the swap) as they do a slowdown's. Beside a slowdown run the swap's turns (as long as the
        experiments') follow the experiments' in one cycle, so one run holds both: its delays never fall in a
        swap turn and the swap is never in a delayed one."""
        if not self.specs:
            return  # probes.json could not be read: its error is listed once, by load()
        with open(os.path.join(self.directory, "probes.json"), "rb") as fh:
            doc = json.load(fh)
        found = doc.get("swap") if isinstance(doc, dict) else None
        if not isinstance(found, dict):
            return
        spec = importlib.util.spec_from_file_location(
            "infer_prof_swap", os.path.join(self.directory, os.path.basename(str(found.get("file"))))
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"swap module {found.get('file')!r} not found")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.swap = module.Swap(found, self.directory, self.switch)
        self.modules.setdefault(self.swap.module, [])
        if self.what_if is not None:
            steps = self.what_if.turn_steps
            swap_turns = [state for state in self.swap.turns for _ in range(steps)]
            self.what_if_turns = self.what_if.sequence(swap_turns)
        elif self.switch_state == SWITCHED:
            self.what_if_turns = itertools.cycle(self.swap.turns)

    def load_what_if(self) -> None:
        """The slowdown experiments, if probes.json asks for them; their busy loop calibrated on this machine."""
        if not self.specs:
            return  # probes.json could not be read: its error is listed once, by load()
        self.what_if = _read_what_if(os.path.join(self.directory, "probes.json"))
        if self.what_if is not None:
            self.what_if_turns = self.what_if.sequence()
            self.step_tally = _StepTally(
                self.directory, bool(self.what_if.measure_steps), self.what_if.skip_steps
            )
            self.overshoot_ns = _calibrate(time.perf_counter_ns)

    def measure_cost(self) -> None:
        """The recording path's cost per call, against a throwaway list: median of 3 runs (COST_CALLS each)."""
        sink: list[Any] = []

        def noop() -> None:
            return None

        wrapped = _sync_wrapper(noop, -1, True, sink, self.switch, self.drop)
        clock = time.perf_counter_ns
        calls = range(COST_CALLS)
        samples = []
        for _ in range(3):
            sink.clear()
            t0 = clock()
            for _ in calls:
                noop()
            t1 = clock()
            for _ in calls:
                wrapped()
            t2 = clock()
            samples.append(((t2 - t1) - (t1 - t0)) / COST_CALLS)
        self.cost_ns = max(1, round(sorted(samples)[1]))

    def patch_imported(self) -> None:
        for name in list(self.modules):
            module = sys.modules.get(name)
            if module is not None:
                self.on_import(name, module)

    def install_finder(self) -> None:
        if self.modules:
            sys.meta_path.insert(0, _Finder(self))

    # -- patching ------------------------------------------------------------------------------------------

    def on_import(self, name: str, module: types.ModuleType) -> None:
        """Patch the probes of a module that has just executed; never raises."""
        try:
            with self.lock:
                before = self._outcome()
                for index in self.modules.get(name, ()):
                    self.pending.discard(index)
                    self.attempt(functools.partial(self.patch, index, module), f"patching probe {index}")
                if self.swap is not None and name == self.swap.module:
                    self.attempt(functools.partial(self.swap.on_import, module), f"swapping in {name}")
                changed = self._outcome() != before
            if changed:
                self.write_status()
            if self.patched:
                self.start_flusher()
        except Exception as exc:
            self.error(f"patching {name}", exc)

    def patch(self, index: int, module: types.ModuleType) -> None:
        spec = self.specs[index]
        assert spec is not None
        try:
            owner, holder, name = _locate(module, spec.function)
        except LookupError as exc:
            self._settle(
                index, self.missing, {"module": spec.module, "function": spec.function, "why": str(exc)}
            )
            return
        except TypeError as exc:
            self._settle(index, self.skipped, {"function": spec.function, "why": str(exc)})
            return
        func, rewrap = _unwrap(vars(holder)[name])
        mark = getattr(func, MARK, None)
        if mark is not None:
            if mark != index:
                self._settle(
                    index, self.skipped, {"function": spec.function, "why": f"already probed by {mark}"}
                )
            return  # ours already (a module patched at activation and imported again)
        kind, why = _kind(func)
        if kind is None:
            self._settle(index, self.skipped, {"function": spec.function, "why": why})
            return
        is_step = spec.component == STEP
        wrap = _sync_wrapper if kind == "sync" else _coroutine_wrapper
        delays = self.what_if.fractions(spec.component) if self.what_if and not is_step else None
        if delays is not None and any(delays) and kind == "sync":
            nesting = self.nesting.setdefault(spec.component, threading.local())
            scale = self.scales.get(spec.component)
            if scale is None:
                assert self.what_if is not None
                scale = self.scales[spec.component] = _Scale(
                    spec.component, delays, self.what_if, self.directory, self.scale_decided
                )
            probe = _delaying_wrapper(
                func, index, _records, self.switch, self.drop, scale, self.overshoot_ns or 0, nesting
            )
            self.delayed.append(index)
        else:
            if delays is not None and any(delays):
                self.not_delayed.append(
                    {"index": index, "function": spec.function, "why": f"a {kind} function"}
                )
            probe = wrap(func, index, is_step, _records, self.switch, self.drop)
        if is_step and kind == "sync" and self.switch_state == SWITCHED:
            if self.what_if_turns is not None:
                probe = _turning(probe, func, index, self.switch, self.what_if_turns, self.step_tally)
            else:
                probe = _switching(probe, func, index, self.switch)
        if spec.size and kind == "sync":  # a coroutine's result is known only when awaited: no size
            probe = _sizing(probe, func, index, spec.size)
        setattr(holder, name, probe if rewrap is None else rewrap(probe))
        entry = {"module": spec.module, "function": spec.function, "kind": kind, "owner": _owner_name(holder)}
        if holder is not owner:
            defined_on = f"{holder.__module__}.{holder.__qualname__}"
            entry["note"] = f"inherited: patched on {defined_on}, so its other subclasses record too"
        self._settle(index, self.patched, entry)

    def _settle(self, index: int, outcome: dict[int, dict[str, Any]], entry: dict[str, Any]) -> None:
        for other in (self.patched, self.missing, self.skipped):
            other.pop(index, None)
        outcome[index] = {"index": index, **entry}

    def _outcome(self) -> tuple[set[int], ...]:
        return set(self.patched), set(self.missing), set(self.skipped), set(self.pending)

    # -- recording -----------------------------------------------------------------------------------------

    def drop(self) -> None:
        self.dropped += 1

    def scale_decided(self) -> None:
        """A component's scale was set (on the host's hot path): its status is written by the next flush."""
        self.status_due = True

    def start_flusher(self) -> None:
        if self.flusher_pid == os.getpid():
            return
        self.flusher_pid = os.getpid()
        threading.Thread(target=self._flush_forever, name="infer-prof-probe-flush", daemon=True).start()

    def _flush_forever(self) -> None:
        pid = os.getpid()
        while self.flusher_pid == pid:
            time.sleep(FLUSH_S)
            self.attempt(self.flush, "flushing spans")
            if self.status_due:
                self.status_due = False
                self.write_status()

    def flush(self) -> None:
        with self.flush_lock:
            for pending, line, stem in (
                (_records, _LINE, "spans"),
                (_sizes, _SIZE_LINE, "sizes"),
                (_delays, _DELAY_LINE, "delays"),
                (_turn_log, _SIZE_LINE, "turns"),
            ):
                batch = pending[:]  # appends only ever land at the end, so the first len(batch) are these
                if not batch:
                    continue
                del pending[: len(batch)]
                text = "".join(map(line.__mod__, batch))
                with open(os.path.join(self.directory, f"{stem}-{os.getpid()}.tsv"), "a") as fh:
                    fh.write(text)

    def at_exit(self) -> None:
        self.attempt(self.flush, "flushing spans at exit")
        self.write_status()

    def after_fork_in_child(self) -> None:
        """A forked child has its own files and flusher; the parent's unflushed records stay the parent's."""
        try:
            del _records[:]
            del _sizes[:]
            del _delays[:]
            del _turn_log[:]
            vars(_thread_ids).pop("native", None)  # this thread is the child's only one, under a new id
            self.pid = os.getpid()
            self.lock = threading.RLock()  # another thread may have held them at the fork
            self.flush_lock = threading.Lock()
            self.dropped = 0
            for scale in self.scales.values():  # the parent's tallies are the parent's
                if not scale.done:
                    scale.tallied = []
            self.step_tally.step_ns = self.step_tally.steps = self.step_tally.seen = 0
            self.step_tally.from_ns = None
            had_flusher = self.flusher_pid is not None
            self.flusher_pid = None  # the parent's flusher thread did not survive the fork
            if had_flusher:
                # the status is written by the flusher's first round, not here: a child that execs at once
                # (subprocess with preexec_fn) then leaves no stray file behind
                self.status_due = True
                self.start_flusher()
        except Exception as exc:
            self.error("after fork", exc)

    # -- status --------------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "ppid": os.getppid(),
            # may still be empty at start-up: each write takes it afresh
            "argv": list(getattr(sys, "argv", [])[:8]),
            "python": sys.version.split()[0],
            "clock": "perf_counter_ns",
            "cost_ns": self.cost_ns,
            "switch": self.switch_state,
            "patched": [self.patched[index] for index in sorted(self.patched)],
            "missing": [self.missing[index] for index in sorted(self.missing)],
            "skipped": [self.skipped[index] for index in sorted(self.skipped)],
            "pending": sorted(self.pending),
            "dropped": self.dropped,
            "errors": list(self.errors),
            **(
                {
                    "what_if": {
                        "experiments": [list(pair) for pair in self.what_if.experiments],
                        "turn_steps": self.what_if.turn_steps,
                        "delayed": sorted(self.delayed),
                        "not_delayed": list(self.not_delayed),
                        "overshoot_ns": self.overshoot_ns,
                        "measure_steps": self.what_if.measure_steps,
                        **(
                            {
                                "scales": {
                                    name: scale.status() for name, scale in self.scales.items() if scale.done
                                }
                            }
                            if self.what_if.measure_steps
                            else {}
                        ),
                    }
                }
                if self.what_if is not None
                else {}
            ),
        }

    def write_status(self) -> None:
        """probe-<pid>.json, replaced atomically; an unwritable directory leaves nowhere to report, so silence."""
        try:
            with self.lock:
                path = os.path.join(self.directory, f"probe-{self.pid}.json")
                temporary = os.path.join(self.directory, f".probe-{self.pid}.json.tmp")
                with open(temporary, "w") as fh:
                    json.dump(self.status(), fh, indent=1)
                    fh.write("\n")
                os.replace(temporary, path)
        except Exception:
            pass


def _owner_name(holder: Any) -> str:
    return holder.__name__ if isinstance(holder, types.ModuleType) else holder.__qualname__


def _activate(directory: str) -> None:
    global _probe
    probe = _probe = _Probe(directory)
    probe.attempt(probe.load, "reading probes.json")
    probe.attempt(probe.open_switch, "mapping the switch file")
    probe.attempt(probe.load_what_if, "reading probes.json's what_if")
    probe.attempt(probe.load_swap, "loading probes.json's swap")
    probe.attempt(probe.measure_cost, "measuring cost_ns")
    probe.attempt(probe.patch_imported, "patching imported modules")
    probe.attempt(probe.install_finder, "installing the import hook")
    probe.attempt(lambda: atexit.register(probe.at_exit), "registering at exit")
    if hasattr(os, "register_at_fork"):  # POSIX only; elsewhere there is no fork to follow
        probe.attempt(
            lambda: os.register_at_fork(after_in_child=probe.after_fork_in_child), "registering at fork"
        )
    probe.write_status()


def _after_own(own_folder: str) -> list[str]:
    """The sys.path entries after our folder, where the sitecustomize that ours shadows lies.

    Only those after it: another copy of this file further on chains onwards, never back to us.
    """
    own = os.path.realpath(own_folder)
    seen = [os.path.realpath(entry or os.curdir) for entry in sys.path]
    start = seen.index(own) + 1 if own in seen else 0
    return [entry for entry, real in zip(sys.path[start:], seen[start:]) if real != own]


def _chain(own_folder: str) -> None:
    """Run the sitecustomize that ours shadows, as site.py would have: its failure is a warning, not a crash."""
    try:
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _after_own(own_folder))
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as err:
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{err.__class__.__name__}: {err}\n"
            )


def _probed_already() -> bool:
    """Whether we run as the sitecustomize another copy of this file chained to, which already set up a probe."""
    first = sys.modules.get("sitecustomize")
    return first is not None and vars(first) is not globals() and getattr(first, "_probe", None) is not None


def _main() -> None:
    directory = os.environ.get(ENV, "")
    if directory and os.path.isfile(os.path.join(directory, "probes.json")) and not _probed_already():
        try:
            _activate(directory)
        except Exception:
            pass  # _activate catches its own failures; this is the last guard of the host's start-up
    _chain(os.path.dirname(os.path.abspath(__file__)))


if __name__ == "sitecustomize":  # not when imported as profiler.inject.sitecustomize, e.g. to find its path
    _main()
