"""Turns one thread's span-log words into its span, lock-use, pause and counter records, after the run."""

from __future__ import annotations

from array import array

from .record_log import RecordLog
from .span_log import (
    COUNTER,
    LOCK_GOT,
    LOCK_RELEASED,
    PAUSE,
    SPAN_EXIT,
    STEP_MARK,
    bits_float,
)

STEP_SPAN = "step"
OUTSIDE = ""  # the parent name of a lock wait or pause that happened outside every span

# The records' rows (RecordLog.records()), as ThreadRecords' docstring lists them.
EventRow = tuple[str, int, int, int, int, int, int]  # name; start_ns, end_ns, self_ns, cpu_ns, depth, step
LockRow = tuple[str, str, int, int, int, int]  # lock name, parent; step, asked_ns, got_ns, released_ns
PauseRow = tuple[str, str, int, int, int]  # kind, parent; step, start_ns, end_ns
CounterRow = tuple[str, float, float]  # name; time_ns, value


class ThreadRecords:
    """One thread's records, as the tracer's summary reads them; `feed` decodes words into them, chunk by chunk.

    events: name; start_ns, end_ns, self_ns, cpu_ns, depth, step (a span's self time is its duration
        less its child spans, its lock waits and its pauses, so none of them overlap).
    locks: lock name, parent span; step, asked_ns, got_ns, released_ns.
    pauses: kind, parent span; step, start_ns, end_ns.
    counters: name; time_ns, value.
    Spans and lock uses still open at the end of a chunk stay open into the next.
    """

    def __init__(self, cpu: bool) -> None:
        self.cpu = cpu
        self.events: RecordLog[EventRow] = RecordLog(1, 6)
        self.locks: RecordLog[LockRow] = RecordLog(2, 4)
        self.pauses: RecordLog[PauseRow] = RecordLog(2, 3)
        self.counters: RecordLog[CounterRow] = RecordLog(1, 2, "d")
        self._open: list[tuple[str, int, int]] = []  # spans: (name, start, cpu_start)
        self._child_ns: list[int] = []  # beside each open span: its children's, lock waits' and pauses' ns
        self._held: list[tuple[str, str, int, int]] = []  # lock uses: (name, parent, asked, got)
        self._step = -1  # set by STEP_MARK, just before the step span's enter; back to -1 at its exit

    def logs(self) -> tuple[RecordLog[tuple[object, ...]], ...]:
        return (self.events, self.locks, self.pauses, self.counters)

    def feed(self, words: array, names: list[str]) -> None:
        """Decode `words` (whole records, in the order the thread wrote them); `names` maps codes to names."""
        cpu = self.cpu
        mark = 3 if cpu else 2
        opened, child, held = self._open, self._child_ns, self._held
        events, locks, pauses, counters = self.events, self.locks, self.pauses, self.counters
        at, end = 0, len(words)
        while at < end:
            tag = words[at]
            if tag >= 0:
                opened.append((names[tag], words[at + 1], words[at + 2] if cpu else 0))
                child.append(0)
                at += mark
            elif tag == SPAN_EXIT:
                name, start, cpu_start = opened.pop()
                child_ns = child.pop()
                stop = words[at + 1]
                cpu_ns = words[at + 2] - cpu_start if cpu else 0
                duration = stop - start
                if child:
                    child[-1] += duration
                events.names.append(name)
                events.values.frombytes(
                    events.pack(start, stop, duration - child_ns, cpu_ns, len(opened), self._step)
                )
                if name == STEP_SPAN:
                    self._step = -1
                at += mark
            elif tag == LOCK_GOT:
                asked, got = words[at + 2], words[at + 3]
                held.append((names[words[at + 1]], self._charge(got - asked), asked, got))
                at += 4
            elif tag == LOCK_RELEASED:
                name, parent, asked, got = held.pop()
                locks.names.extend((name, parent))
                locks.values.frombytes(locks.pack(self._step, asked, got, words[at + 1]))
                at += 2
            elif tag == PAUSE:
                start, stop = words[at + 2], words[at + 3]
                pauses.names.extend((names[words[at + 1]], self._charge(stop - start)))
                pauses.values.frombytes(pauses.pack(self._step, start, stop))
                at += 4
            elif tag == COUNTER:
                counters.names.append(names[words[at + 1]])
                counters.values.frombytes(counters.pack(words[at + 2], bits_float(words[at + 3])))
                at += 4
            elif tag == STEP_MARK:
                self._step = words[at + 1]
                at += 2
            else:
                raise ValueError(f"span log: unknown record tag {tag} at word {at}")

    def _charge(self, ns: int) -> str:
        """Count `ns` (a lock wait, a pause) against the innermost open span; its name, or OUTSIDE."""
        if self._open:
            self._child_ns[-1] += ns
            return self._open[-1][0]
        return OUTSIDE
