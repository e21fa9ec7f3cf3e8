"""The in-process probe's files from the nodes Ray placed the server's workers on: each node's records moved onto the driver's clock and merged into read_probe's, keyed by (node, pid).

The probe times with perf_counter_ns, CLOCK_MONOTONIC on Linux: one clock for every process of a machine,
counted from that machine's boot, so another node's readings mean nothing here until aligned. Each node's
agent answers its own perf_counter_ns in rounds (clock_offsets.py) as sampling starts and again as the probe's
files are fetched; a record's offset is read on the line between the two (a monotonic clock's rate differs a
little between machines), so its time on the driver's clock is good to the larger of the two rounds' bounds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...analysis.clock_offsets import ClockOffset, ClockRound, estimate_offset
from .inject import records_of

# read_probe's arrays and the columns of each that hold a perf_counter_ns reading (sitecustomize's layout).
TIME_COLUMNS = {"records": (2, 3), "sizes": (0,), "delays": (2, 3, 4, 5), "turns": (0,)}
COLUMNS = {"spans": ("records", 5), "sizes": ("sizes", 2), "delays": ("delays", 8), "turns": ("turns", 2)}


class NodePid(int):
    """A pid on another node: an int to the probe's analysis (which reads and sorts pids as ints) that equals only
    the same pid on the same node, so two machines' pid 1234 stay two processes."""

    node_id: str

    def __new__(cls, node_id: str, pid: int) -> NodePid:
        self = super().__new__(cls, pid)
        self.node_id = node_id
        return self

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodePid):
            return int(self) == int(other) and self.node_id == other.node_id
        return False if isinstance(other, int) else NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((self.node_id, int(self)))

    def __getnewargs__(self) -> tuple[str, int]:  # type: ignore[override]
        """Copied (the run's result is deep-copied as it is written) and pickled whole."""
        return self.node_id, int(self)

    def __str__(self) -> str:
        return f"{self.node_id[:8]}:{int(self)}"

    __repr__ = __str__


@dataclass(frozen=True, slots=True)
class ClockLine:
    """A node's perf_counter_ns minus the driver's, measured at `start_at_ns` and `stop_at_ns` (driver readings), and
    read on the straight line between them (held flat outside)."""

    start: ClockOffset
    start_at_ns: int
    stop: ClockOffset | None = None
    stop_at_ns: int | None = None

    @property
    def uncertainty_ns(self) -> float:
        return max(self.start.uncertainty_ns, self.stop.uncertainty_ns if self.stop else 0.0)

    @property
    def drift_ns(self) -> float | None:
        """How far the offset moved between the two measurements (the clocks' rates differ; None with one)."""
        return self.stop.offset_ns - self.start.offset_ns if self.stop else None

    def to_driver(self, remote_ns: np.ndarray) -> np.ndarray:
        """Readings of the node's perf_counter_ns on the driver's."""
        remote = np.asarray(remote_ns, dtype=np.int64)
        offset = np.full(remote.shape, self.start.offset_ns, dtype=np.float64)
        if self.stop is not None and self.stop_at_ns is not None and self.stop_at_ns > self.start_at_ns:
            guess = remote - self.start.offset_ns  # near enough to place it on the line
            fraction = np.clip((guess - self.start_at_ns) / (self.stop_at_ns - self.start_at_ns), 0.0, 1.0)
            offset = self.start.offset_ns + fraction * (self.stop.offset_ns - self.start.offset_ns)
        return remote - np.rint(offset).astype(np.int64)


def measured(rounds: Sequence[ClockRound]) -> tuple[ClockOffset, int]:
    """The offset of `rounds` and when it holds: the middle of its shortest round, on the driver's clock."""
    best = min(rounds, key=lambda one: one.round_trip_ns)
    return estimate_offset(rounds), (best.sent_ns + best.received_ns) // 2


def clock_line(start: Sequence[ClockRound], stop: Sequence[ClockRound] = ()) -> ClockLine:
    first, first_at = measured(start)
    if not stop:
        return ClockLine(first, first_at)
    last, last_at = measured(stop)
    return ClockLine(first, first_at, last, last_at)


def node_entries(
    files: dict[int, dict[str, str]], line: ClockLine, node_id: str
) -> dict[int, dict[str, Any]]:
    """One node's probe files (ray_agent.read_probe_files' text) in read_probe's shape, keyed NodePid(node, pid),
    every time column on the driver's clock."""
    found: dict[int, dict[str, Any]] = {}
    for pid, texts in files.items():
        if "probe" not in texts and "spans" not in texts:
            continue  # read_probe keeps a process by these two
        try:
            status = json.loads(texts["probe"]) if "probe" in texts else {}
        except ValueError:
            status = {"errors": [f"probe-{pid}.json could not be read"]}
        entry: dict[str, Any] = {"status": status, "records": np.zeros((0, 5), dtype=np.int64)}
        for kind, (name, width) in COLUMNS.items():
            if kind in texts:
                entry[name] = records_of(texts[kind].splitlines(), width)
        for name, columns in TIME_COLUMNS.items():
            if name in entry and len(entry[name]):
                table = entry[name].copy()
                for column in columns:
                    table[:, column] = line.to_driver(table[:, column])
                entry[name] = table
        found[NodePid(node_id, int(pid))] = entry
    return found


def merge_found(
    local: dict[int, dict[str, Any]],
    nodes: dict[str, dict[int, dict[str, Any]]],
    *,
    driver_node: str,
    shared_host: dict[str, list[int]],
) -> dict[int, dict[str, Any]]:
    """read_probe's processes of this machine, and each other node's. A node on this very host (`shared_host`: its
    server pids) wrote into the same folders on the same clock, so its processes read here are that node's: keyed
    NodePid, then replaced by what its agent sent, if it sent them. The driver's own node is the local read: what its
    agent sent adds only a process whose files lie elsewhere (a worker whose environment names another folder)."""
    merged = dict(local)
    for node_id, pids in shared_host.items():
        for pid in pids:
            if node_id != driver_node and pid in merged and not isinstance(pid, NodePid):
                merged[NodePid(node_id, pid)] = merged.pop(pid)
    for node_id, entries in nodes.items():
        if node_id == driver_node:
            for key, entry in entries.items():
                merged.setdefault(int(key), entry)
            continue
        if node_id in shared_host:
            for key in entries:  # a plain int is this machine's: the same file, read here too
                merged.pop(int(key), None)
        merged.update(entries)
    return merged
