"""What each thread of one server process does, told from its py-spy samples (never from its name), and each thread's split.

Threads are keyed by thread id: two pool threads with one name stay two. A sample is *work* unless it
waits (idle, waiting, lock); a GIL wait counts as work, since the thread has Python to run. Each work
sample votes for a role: the innermost Python frame an engine table's `roles` rows name (vLLM's
run_busy_loop is the engine loop, worker_busy_loop a model worker, llama_cpp's Llama.generate the
engine loop...), else its component (scheduler, kv_alloc -> engine loop; model, sampler, prepare or
a kernel -> model worker; api -> api; tokenizer, detokenizer -> tokenizer). A thread's role:

    idle helper   it worked in under IDLE_HELPER_WORK of its samples: its lock waits are waits for
                  work too (a thread that has nothing to do contends for nothing)
    the vote      the role most of its work voted for
    unknown       it worked, in code no table names: said plainly ("can't tell")

The engine thread of a process is the engine-loop thread with the most work (then the model worker
with the most, then, with no table matching, the busiest thread with model, kernel or scheduler
work); every engine-loop thread of the process is pooled into the engine split, since a thread
pool (llama-cpp-python's AnyIO workers) may run the token loop on a different thread each request.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..rundir.schema import ForeignProcess, SampledThread, ThreadSampleCounts
from .classify import (
    Classification,
    ComponentRules,
    Frame,
    Stack,
    WaitRules,
    classify,
    is_gil_wait,
    table_rules,
)
from .engine_tables import EngineTable, all_tables

IDLE_HELPER_WORK = 0.05  # of its samples: a thread that works less than this is a helper waiting for work
ENGINE_LOOP, MODEL_WORKER, API, TOKENIZER, IDLE_HELPER, UNKNOWN = (
    "engine loop",
    "model worker",
    "api",
    "tokenizer",
    "idle helper",
    "unknown",
)
ROLE_WORDS = {
    ENGINE_LOOP: "engine loop",
    MODEL_WORKER: "model worker",
    API: "API / event loop",
    TOKENIZER: "tokenizer / detokenizer",
    IDLE_HELPER: "idle helper",
    UNKNOWN: "unknown (can't tell)",
}
_COMPONENT_ROLE = {
    "scheduler": ENGINE_LOOP,
    "kv_alloc": ENGINE_LOOP,
    "queue": ENGINE_LOOP,
    "model_glue": MODEL_WORKER,
    "model_kernels": MODEL_WORKER,
    "sampler": MODEL_WORKER,
    "prepare": MODEL_WORKER,
    "api": API,
    "tokenizer": TOKENIZER,
    "detokenizer": TOKENIZER,
}
_WAITS = ("idle", "waiting", "lock")
_EVENT_LOOP = re.compile(r"(^|/)(asyncio/(runners|base_events)\.py|uvloop/)")
_WAIT_ROLE = {"queueing": API, "client": API, "worker": ENGINE_LOOP}


@dataclass
class ThreadSplit:
    """One thread's sample counts and the role they give it."""

    thread_id: int | None
    name: str | None
    samples: int = 0
    native_samples: int = 0
    gil_samples: int = 0
    dispatch: int = 0
    categories: Counter[str] = field(default_factory=Counter)
    components: Counter[str] = field(default_factory=Counter)
    waits: Counter[str] = field(
        default_factory=Counter
    )  # wait kind -> samples (idle, queueing, worker, client, lock)
    lock_components: Counter[str] = field(default_factory=Counter)
    gil_components: Counter[str] = field(default_factory=Counter)
    votes: Counter[str] = field(default_factory=Counter)
    by_category: Counter[str] = field(default_factory=Counter)  # "category/component" -> samples
    event_loop: bool = False  # an asyncio / uvloop loop runs on it
    role: str = UNKNOWN
    reason: str = ""

    @property
    def work(self) -> int:
        """Samples that are not waits (a GIL wait is work: the thread has Python to run)."""
        return self.samples - sum(self.categories.get(name, 0) for name in _WAITS) + self.gil_samples

    @property
    def label(self) -> str:
        return (
            f"{self.name or 'thread'} ({self.thread_id})"
            if self.thread_id is not None
            else (self.name or "thread")
        )

    def counts(self) -> ThreadSampleCounts:
        """Its counts in profiler.collectors.sampling.summarize_stacks's shape (for breakdown.samples_split)."""
        return {
            "thread_ids": [self.thread_id] if self.thread_id is not None else [],
            "samples": self.samples,
            "native_samples": self.native_samples,
            "categories": dict(self.categories),
            "components": dict(self.components),
            "lock_components": dict(self.lock_components),
            "gil_components": dict(self.gil_components),
            "dispatch": self.dispatch,
            "gil": self.gil_samples,
            "waits": dict(self.waits),
            "by_category": dict(self.by_category),
            "work": self.work,
        }

    def as_dict(self, native_stacks: bool) -> SampledThread:
        total = self.samples or 1
        return {
            "thread_id": self.thread_id,
            "name": self.name,
            "role": self.role,
            "role_words": ROLE_WORDS[self.role],
            "reason": self.reason,
            "samples": self.samples,
            "work_share": self.work / total,
            "categories": {key: count / total for key, count in self.categories.most_common()},
            "components": {key: count / total for key, count in self.components.most_common()},
            "waits": {key: count / total for key, count in self.waits.most_common()},
            "gil_wait": self.gil_samples / total if native_stacks else None,
            "event_loop": self.event_loop,
            "counts": self.counts(),
        }


@dataclass
class ProcessRoles:
    """One process's threads, their roles, the engine thread and what the process is."""

    pid: int | None
    threads: list[ThreadSplit]
    engine: str | None  # the engine table whose files the samples show (vllm, llama-cpp-python, ...)
    role: str  # the process's job: its engine thread's role, else its busiest thread's; "idle" or "unknown"
    engine_thread: int | None  # thread id
    engine_threads: list[int]  # every engine-loop thread (pooled for the engine split), or the chosen one
    native_stacks: bool  # most samples carry native frames: interpreter vs kernel is resolved
    notes: list[str]

    def thread(self, thread_id: int | None) -> ThreadSplit | None:
        return next((thread for thread in self.threads if thread.thread_id == thread_id), None)

    def as_dict(self) -> ForeignProcess:
        return {
            "pid": self.pid,
            "role": self.role,
            "role_words": ROLE_WORDS.get(self.role, self.role),
            "engine": self.engine,
            "engine_thread": self.engine_thread,
            "engine_threads": self.engine_threads,
            "resolution": "native" if self.native_stacks else "python",
            "threads": [thread.as_dict(self.native_stacks) for thread in self.threads],
            "notes": self.notes,
        }


def _role_rows(tables: Iterable[EngineTable]) -> list[tuple[str, re.Pattern[str], re.Pattern[str] | None]]:
    return [
        (role, re.compile(file), re.compile(func) if func else None)
        for table in tables
        for role, file, func in table.roles
    ]


def _role_of(
    frames: tuple[Frame, ...],
    rows: list[tuple[str, re.Pattern[str], re.Pattern[str] | None]],
    component: str | None,
    category: str,
) -> str | None:
    for frame in reversed(frames):
        if not frame.python:
            continue
        for role, file_re, func_re in rows:
            if file_re.search(frame.where) and (func_re is None or func_re.search(frame.function)):
                return role
    if component in _COMPONENT_ROLE:
        return _COMPONENT_ROLE[component]
    return MODEL_WORKER if category == "kernel" else None


def _engine_of(stacks: list[Stack], tables: tuple[EngineTable, ...]) -> str | None:
    for table in tables:
        patterns = [re.compile(pattern) for pattern in table.detect]
        if patterns and any(
            pattern.search(frame.where)
            for stack in stacks
            for frame in stack.frames
            if frame.python
            for pattern in patterns
        ):
            return table.name
    return None


def process_roles(
    stacks: Iterable[Stack],
    *,
    pid: int | None = None,
    tables: Iterable[EngineTable] | None = None,
    rules: ComponentRules | None = None,
    waits: WaitRules | None = None,
) -> ProcessRoles:
    """Roles and splits of one process's threads from its parsed py-spy stacks (classify.parse_raw of its raw output).

    tables: the engine tables (default: the user's, then the built-in ones); rules/waits: compiled
    ones to reuse across processes (default: from `tables`)."""
    stacks = list(stacks)
    tables = all_tables() if tables is None else tuple(tables)
    rules = rules or ComponentRules(table_rules(tables))
    waits = waits or WaitRules(tables)
    rows = _role_rows(tables)
    threads: dict[int | str | None, ThreadSplit] = {}  # by thread id, else by name
    for stack in stacks:
        key = stack.thread_id if stack.thread_id is not None else stack.thread_name
        thread = threads.setdefault(key, ThreadSplit(stack.thread_id, stack.thread_name))
        _count(thread, stack, classify(stack, rules=rules, waits=waits), rows)
    ordered = sorted(threads.values(), key=lambda thread: (-thread.samples, thread.thread_id or 0))
    total = sum(thread.samples for thread in ordered)
    native_stacks = total > 0 and sum(thread.native_samples for thread in ordered) >= 0.5 * total
    notes: list[str] = []
    for thread in ordered:
        _assign(thread)
    engine_thread, engine_threads = _engine_threads(ordered, notes)
    return ProcessRoles(
        pid,
        ordered,
        _engine_of(stacks, tables),
        _process_role(ordered, engine_thread),
        engine_thread,
        engine_threads,
        native_stacks,
        notes,
    )


def _count(
    thread: ThreadSplit,
    stack: Stack,
    label: Classification,
    rows: list[tuple[str, re.Pattern[str], re.Pattern[str] | None]],
) -> None:
    """One stack's samples counted into its thread: by category and component, its waits, and its vote for a role."""
    count = stack.count
    thread.samples += count
    if stack.has_native_frames:
        thread.native_samples += count
    thread.categories[label.category] += count
    thread.components[label.component or "none"] += count
    thread.by_category[f"{label.category}/{label.component or 'none'}"] += count
    if not thread.event_loop and any(
        frame.python and _EVENT_LOOP.search(frame.where) for frame in stack.frames
    ):
        thread.event_loop = True
    if label.dispatch:
        thread.dispatch += count
    gil = label.category == "lock" and stack.has_native_frames and is_gil_wait(stack.frames)
    if label.category == "lock":
        thread.lock_components[label.component or "none"] += count
        if gil:
            thread.gil_samples += count
            thread.gil_components[label.component or "none"] += count
        else:
            thread.waits["lock"] += count
    elif label.wait is not None:
        thread.waits[label.wait] += count
        # A request waiting behind another, or for its tokens, is a request handler; a loop waiting on
        # its worker is the engine loop. A wait for work says nothing of the job.
        if label.wait in _WAIT_ROLE:
            thread.votes[_WAIT_ROLE[label.wait]] += count
    if label.category not in _WAITS or gil:
        role = _role_of(stack.frames, rows, label.component, label.category)
        if role is not None:
            thread.votes[role] += count


def _process_role(threads: list[ThreadSplit], engine_thread: int | None) -> str:
    """The process's job: its engine thread's role, else its busiest thread's; "idle" or "unknown"."""
    engine_role = next((thread.role for thread in threads if thread.thread_id == engine_thread), None)
    busiest = max(threads, key=lambda thread: thread.work, default=None)
    if engine_role is not None:
        return engine_role
    if busiest is not None and busiest.work > 0 and busiest.role != IDLE_HELPER:
        return busiest.role
    return "idle" if threads else UNKNOWN


def _assign(thread: ThreadSplit) -> None:
    work = thread.work
    share = work / thread.samples if thread.samples else 0.0
    if thread.event_loop and not thread.votes:
        thread.role = API
        thread.reason = f"it runs the event loop, which waited {1.0 - share:.0%} of its samples"
        return
    if share < IDLE_HELPER_WORK and not thread.votes:
        thread.role = IDLE_HELPER
        thread.reason = f"worked in {share:.1%} of its samples; the rest it waited"
        contention = thread.waits.pop("lock", 0)
        if contention:
            # A thread with (almost) nothing to do contends for nothing: its lock waits are waits for work.
            thread.waits["idle"] += contention
            thread.categories["lock"] -= contention
            thread.categories["idle"] += contention
            thread.categories = +thread.categories
            for key in [key for key in thread.by_category if key.startswith("lock/")]:
                thread.by_category["idle/" + key[5:]] += thread.by_category.pop(key)
            thread.lock_components.clear()
        return
    if not thread.votes:
        thread.role = UNKNOWN
        thread.reason = f"can't tell: it worked in {share:.0%} of its samples, in code no engine table names"
        return
    role, votes = thread.votes.most_common(1)[0]
    voted = sum(thread.votes.values())
    # A loop that runs its model in the same thread (llama.cpp, transformers) is the engine loop.
    if role == MODEL_WORKER and thread.votes.get(ENGINE_LOOP, 0) >= 0.05 * voted:
        role, votes = ENGINE_LOOP, thread.votes[ENGINE_LOOP]
    thread.role = role
    waited = 1.0 - share
    thread.reason = (
        f"{votes / voted:.0%} of what it did (work, or waits for the engine) is {ROLE_WORDS[role]} code"
        + (
            f"; it waited for work {thread.waits.get('idle', 0) / thread.samples:.0%} of its samples"
            if waited >= 0.5 and thread.waits.get("idle")
            else ""
        )
    )


def _engine_threads(threads: list[ThreadSplit], notes: list[str]) -> tuple[int | None, list[int]]:
    for role in (ENGINE_LOOP, MODEL_WORKER):
        chosen = [thread for thread in threads if thread.role == role and thread.thread_id is not None]
        if chosen:
            chosen.sort(key=lambda thread: -thread.work)
            return chosen[0].thread_id, [
                thread.thread_id for thread in chosen if thread.thread_id is not None
            ]

    # No table names the loop: the busiest thread that runs model, kernel or scheduler work stands in.
    def engine_work(thread: ThreadSplit) -> int:
        return sum(thread.votes.get(role, 0) for role in (ENGINE_LOOP, MODEL_WORKER))

    candidates = [thread for thread in threads if engine_work(thread) > 0 and thread.thread_id is not None]
    if candidates:
        best = max(candidates, key=lambda thread: (thread.work, engine_work(thread)))
        notes.append(
            f"no thread runs code an engine table names as the engine loop: {best.label}, the one with the "
            "most work that runs model, kernel or scheduler code, stands in for it"
        )
        return best.thread_id, [best.thread_id] if best.thread_id is not None else []
    # Nothing names any engine work (too few samples, or an engine no table knows): the busiest thread whose
    # job we cannot tell stands in, and the notes say so; API, tokenizer and idle threads never do.
    unknown = [
        thread
        for thread in threads
        if thread.role == UNKNOWN and thread.work > 0 and thread.thread_id is not None
    ]
    if not unknown:
        return None, []
    best = max(unknown, key=lambda thread: thread.work)
    notes.append(
        f"can't tell which thread is the engine: no sample names engine or model code; {best.label}, the "
        "thread with the most work, stands in for it"
    )
    return best.thread_id, [best.thread_id] if best.thread_id is not None else []
