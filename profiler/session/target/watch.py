"""Sample a whole server tree: one py-spy per Python process, started for the processes there at the start and for each child that appears later."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ...collectors.base import Collector
from ...collectors.sampling import SamplingCollector, SamplingResult
from .tree import (
    PROC,
    ProcessInfo,
    assign_role,
    pids_listening,
    read_process,
    running,
    tree_pids,
)

CollectorT = TypeVar("CollectorT")
ResultT = TypeVar("ResultT")

POLL_S = 0.5  # how often /proc is read for new children
MAX_PROCESSES = 64  # a tree that spawns more (a compiler farm) is listed up to here
EXEC_GRACE_S = 5.0  # a late child is read again this long, in case it exec's Python after it appeared
ATTACH_TRIES = 3  # a just-spawned child may not have its interpreter up yet: py-spy is tried again next poll


@dataclass
class WatchedProcess:
    """A process of the tree, when it was seen, and the sampler on it (None: not Python, or not sampled)."""

    info: ProcessInfo
    first_seen_s: float  # since the watch started
    late: bool  # appeared after the watch started
    collector: Collector[SamplingResult] | None = None
    tries: int = 0
    not_sampled: str | None = None  # why no sampler runs on it
    gone: bool = False
    extra: dict[str, object] = field(default_factory=dict)


class TreeSampler:
    """Watch the tree under `root` between start() and stop(), sampling each Python process with
    `make_collector(pid)`; processes() lists every process seen, in the order they appeared."""

    def __init__(
        self,
        root: int,
        make_collector: Callable[[int], Collector[SamplingResult]],
        *,
        port: int | None = None,
        poll_s: float = POLL_S,
        proc: Path = PROC,
    ) -> None:
        self.root, self.port, self.poll_s, self.proc = root, port, poll_s, proc
        self._make_collector = make_collector
        self._seen: dict[int, WatchedProcess] = {}
        self._started = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._started = time.perf_counter()
        self._scan(initial=True)
        self._thread = threading.Thread(target=self._watch, name="infer-prof-tree-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        live = {pid for pid in tree_pids(self.root, self.proc) if running(pid, self.proc)}
        with self._lock:
            for pid, watched in self._seen.items():
                watched.gone = pid not in live  # as the run ends, not as the last poll saw it
            for pid, watched in self._seen.items():
                self._rename(pid, watched)
            at_once(lambda c: c.stop(), [w.collector for w in self._seen.values() if w.collector is not None])

    def _rename(self, pid: int, watched: WatchedProcess) -> None:
        """Read a live process's title again: a child names itself after it starts (vLLM's setproctitle), maybe
        after it was first seen."""
        info = read_process(pid, self.proc)
        if info is None or (info.title, info.cmdline) == (watched.info.title, watched.info.cmdline):
            return
        info.listening, info.python = watched.info.listening, watched.info.python
        assign_role(info, self.port)
        watched.info = info

    def results_so_far(self) -> dict[int, SamplingResult]:
        """pid -> the sampling result of every process sampled so far, each py-spy restarted to read it (py-spy
        writes its samples only when it stops): what a run that goes on until resolved looks at between rounds."""
        with self._lock:
            watched = [(pid, w.collector) for pid, w in self._seen.items() if w.collector is not None]
        return dict(zip([pid for pid, _ in watched], at_once(look, [c for _, c in watched]), strict=True))

    def processes(self) -> list[WatchedProcess]:
        with self._lock:
            return list(self._seen.values())

    def pids(self) -> set[int]:
        with self._lock:
            return set(self._seen)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._scan(initial=False)

    def _scan(self, *, initial: bool) -> None:
        live = tree_pids(self.root, self.proc)
        now = time.perf_counter() - self._started
        listeners: set[int] | None = None  # read once a scan, and only when a new process needs it
        with self._lock:
            for pid in live:
                watched = self._seen.get(pid)
                if watched is None:
                    if len(self._seen) >= MAX_PROCESSES:
                        continue
                    info = read_process(pid, self.proc)
                    if info is None:
                        continue
                    if self.port is not None and listeners is None:
                        listeners = set(pids_listening(self.port, self.proc))
                    info.listening = pid in (listeners or ())
                    assign_role(info, self.port)
                    watched = WatchedProcess(info, now, late=not initial)
                    if not info.python:
                        watched.not_sampled = "not a Python process"
                    self._seen[pid] = watched
                    if not initial:
                        continue  # sample it from the next poll on: a child just exec'd may not run Python yet
                self._maybe_sample(watched, pid, now)
            for pid, watched in self._seen.items():
                watched.gone = pid not in live

    def _maybe_sample(self, watched: WatchedProcess, pid: int, now: float) -> None:
        if (
            watched.not_sampled == "not a Python process"
            and watched.late
            and now - watched.first_seen_s < EXEC_GRACE_S
        ):
            # an exec'd child shows its new executable only after exec: read it again while it is young
            info = read_process(pid, self.proc)
            if info is not None and info.python:
                info.listening = watched.info.listening
                assign_role(info, self.port)
                watched.info, watched.not_sampled = info, None
        if watched.not_sampled or watched.tries >= ATTACH_TRIES:
            return
        if watched.collector is not None and watched.collector.status != "skipped":
            return
        watched.tries += 1
        collector = self._make_collector(pid)
        collector.start()
        watched.collector = collector
        if collector.status != "ok" and watched.tries >= ATTACH_TRIES:
            watched.not_sampled = collector.reason or "py-spy could not attach"


def look(collector: Collector[SamplingResult]) -> SamplingResult:
    """What a sampler has so far: py-spy restarted (it writes its samples only when it stops), then its result."""
    if isinstance(collector, SamplingCollector):
        collector.restart()
    return collector.result()


def at_once(call: Callable[[CollectorT], ResultT], collectors: list[CollectorT]) -> list[ResultT]:
    """`call` on every collector at the same time, one thread each, the results in order. Why: stopping a py-spy
    waits for it to write its samples and starting one for it to attach (reading a native process's symbols), a
    second or more each; one after another, a look at a tree of four processes cost the sum of them."""
    if len(collectors) <= 1:
        return [call(collector) for collector in collectors]
    with ThreadPoolExecutor(max_workers=len(collectors), thread_name_prefix="infer-prof-py-spy") as pool:
        return list(pool.map(call, collectors))
