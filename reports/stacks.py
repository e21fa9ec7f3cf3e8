"""A run's py-spy stacks (samples.txt) with their labels (sample_labels.csv), grouped by thread for the
flame graph, the top-frames table and speedscope.json.

samples.txt is py-spy's `record --format raw --threads` output: one line per distinct stack,
`thread (TID): NAME;frame;frame;... COUNT`, outermost frame first, each frame `function (file:line)`
for Python or `symbol (library)` for native code. Reports may not import the profiler's classifier,
so the session writes each line's category and component beside it (sample_labels.csv); a run
without that file shows its stacks unclassified.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ..errors import ReportError
from ..profiler.rundir.results import RunData
from ..profiler.rundir.samples import flag
from ..profiler.rundir.validate import whole_numbers

UNCLASSIFIED = "unclassified"
# The engine's thread name (engine/engine.py ENGINE_THREAD_NAME): how a run without labels finds it.
ENGINE_THREAD_NAME = "infer-prof-engine"
_THREAD = re.compile(r"^thread \((?P<tid>[^)]*)\)(?::\s?(?P<name>.*))?$")
_FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
# Threads of one pool differ only by a trailing number (loadgen-client-3, ThreadPoolExecutor-0_1).
_POOL_SUFFIX = re.compile(r"[-_ ]?\d+(?:_\d+)?$")


class StackFrame(NamedTuple):
    """One frame: a Python function with its file and line, or a native symbol with its library."""

    function: str
    file: str | None = None
    line: int | None = None

    @property
    def python(self) -> bool:
        return self.line is not None or bool(self.file and self.file.endswith(".py"))

    @property
    def where(self) -> str:
        if self.file and self.line is not None:
            return f"{self.file}:{self.line}"
        return self.file or ""


@dataclass
class SampledStack:
    """One line of samples.txt with its label."""

    thread_id: int | None
    thread_name: str
    frames: tuple[StackFrame, ...]  # outermost first
    count: int
    category: str = UNCLASSIFIED
    component: str = ""
    engine: bool = False


@dataclass
class ThreadGroup:
    """Threads shown as one: the engine thread alone, or a pool (e.g. 30 load-generator clients) merged."""

    name: str
    threads: set[int | None] = field(default_factory=set)
    stacks: list[SampledStack] = field(default_factory=list)
    engine: bool = False

    @property
    def samples(self) -> int:
        return sum(stack.count for stack in self.stacks)

    @property
    def label(self) -> str:
        count = len(self.threads)
        what = "engine thread" if self.engine else (f"{count} threads" if count > 1 else "thread")
        return f"{self.name} ({what}, {self.samples:,} samples)"

    def categories(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for stack in self.stacks:
            counts[stack.category] += stack.count
        return counts


def python_only(groups: list[ThreadGroup]) -> bool:
    """True when no stack holds a native frame: the samples cannot tell Python from the native code it calls."""
    return not any(not frame.python for group in groups for stack in group.stacks for frame in stack.frames)


def shown_component(component: str, no_native: bool) -> str:
    """The component a sample is shown under: without native stacks the forward's glue and kernels are one,
    "model", since no frame tells a Python line from the kernel it calls (the time split does the same,
    profiler.analysis.breakdown)."""
    return "model" if no_native and component in ("model_glue", "model_kernels") else component


def parse_frame(text: str) -> StackFrame:
    """`function (file:line)` or `symbol (library)`; a bare name has neither file nor line."""
    match = _FRAME.match(text.strip())
    if not match:
        return StackFrame(text.strip())
    line = match.group("line")
    return StackFrame(match.group("name"), match.group("file") or None, int(line) if line else None)


def parse_samples(text: str, source: Path | str = "samples.txt") -> list[tuple[int, SampledStack]]:
    """(line number, stack) of every stack line; a malformed line is a ReportError naming it."""
    stacks = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        body, _, count = line.rpartition(" ")
        if not body or not count.isdigit():
            raise ReportError(
                f"{source}:{number}: expected `frame;frame;... count` (py-spy record --format raw), got {raw[:80]!r}"
            )
        parts = [part for part in body.split(";") if part.strip()]
        thread_id, thread_name = None, ""
        if parts and parts[0].startswith("process "):
            parts = parts[1:]  # --subprocesses prefix
        match = _THREAD.match(parts[0]) if parts else None
        if match:
            parts = parts[1:]
            tid = match.group("tid")
            thread_id = int(tid, 16) if tid.startswith("0x") else int(tid) if tid.isdigit() else None
            thread_name = match.group("name") or ""
        frames = tuple(parse_frame(part) for part in parts)
        stacks.append((number, SampledStack(thread_id, thread_name, frames, int(count))))
    return stacks


def read_stacks(run: RunData) -> list[SampledStack] | None:
    """The run's labelled stacks, or None when it recorded no samples.txt."""
    path = run.path / run.result.files.get("samples", "samples.txt")
    if not path.exists():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(
            f"{path}: cannot read the py-spy samples ({exc}); re-record the run or delete the file"
        ) from None
    numbered = parse_samples(text, path)
    labels = _read_labels(run.path / run.result.files.get("sample_labels", "sample_labels.csv"))
    for number, stack in numbered:
        label = labels.get(number)
        if label is not None:
            stack.category, stack.component, stack.engine = label
        else:
            stack.engine = stack.thread_name == ENGINE_THREAD_NAME
    return [stack for _, stack in numbered]


def process_groups(run: RunData) -> list[ThreadGroup]:
    """A --target run's other sampled processes, one flame-graph group each (all its threads), after the primary's
    thread groups: samples-<pid>.txt labelled by sample_labels-<pid>.csv."""
    groups = []
    for entry in (run.result.target or {}).get("processes") or []:
        name = entry.get("samples_file")
        if not name or entry.get("primary") or not (run.path / name).is_file():
            continue
        path = run.path / name
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ReportError(
                f"{path}: cannot read the py-spy samples ({exc}); re-record the run or delete the file"
            ) from None
        # samples-<pid>.txt, or samples-<node>-<pid>.txt for a process Ray placed on another node: labels beside it
        labels = _read_labels(
            run.path / (name.replace("samples-", "sample_labels-", 1).removesuffix(".txt") + ".csv")
        )
        group = ThreadGroup(f"{entry.get('role') or 'process'}, pid {entry.get('key') or entry.get('pid')}")
        for number, stack in parse_samples(text, path):
            if number in labels:
                stack.category, stack.component, _ = labels[number]
            group.threads.add(stack.thread_id)
            group.stacks.append(stack)
        if group.stacks:
            groups.append(group)
    return groups


def _read_labels(path: Path) -> dict[int, tuple[str, str, bool]]:
    if not path.exists():
        return {}
    try:
        table = pd.read_csv(path, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise ReportError(
            f"{path}: not a readable sample_labels.csv ({exc}); delete it to show the stacks unclassified"
        ) from None
    missing = {"line", "category", "component", "engine_thread"} - set(table.columns)
    if missing:
        raise ReportError(
            f"{path}: missing column(s) {', '.join(sorted(missing))}; delete it to show the stacks unclassified"
        )
    table["line"] = table["line"].replace("", float("nan"))  # keep_default_na=False keeps a gap as ""
    table = whole_numbers(table, ("line",), path, non_negative=("line",))
    engine = flag(table["engine_thread"], False)
    return {
        int(line): (str(category) or UNCLASSIFIED, str(component), bool(is_engine))
        for line, category, component, is_engine in zip(
            table["line"], table["category"], table["component"], engine
        )
    }


def thread_groups(stacks: list[SampledStack]) -> list[ThreadGroup]:
    """The engine thread first, then pools of same-named threads merged, then the rest, by samples."""
    pools: dict[str, set[int | None]] = {}
    for stack in stacks:
        pools.setdefault(_POOL_SUFFIX.sub("", _thread_name(stack)), set()).add(stack.thread_id)
    groups: dict[tuple[bool, str], ThreadGroup] = {}
    for stack in stacks:
        name = _thread_name(stack)
        pooled = _POOL_SUFFIX.sub("", name)
        if not stack.engine and pooled and pooled != name and len(pools[pooled]) > 1:
            name = f"{pooled}-*"
        group = groups.setdefault((stack.engine, name), ThreadGroup(name, engine=stack.engine))
        group.threads.add(stack.thread_id)
        group.stacks.append(stack)
    return sorted(groups.values(), key=lambda group: (not group.engine, -group.samples))


def _thread_name(stack: SampledStack) -> str:
    if stack.thread_name:
        return stack.thread_name
    return f"thread {stack.thread_id}" if stack.thread_id is not None else "unknown thread"
