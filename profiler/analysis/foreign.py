"""The verdict for an engine infer-prof did not write, from the roles and splits of its processes (profiler.analysis.roles).

The field's 1% / 30% rule is about the engine loop's own time: host control work against the model's
time, per step. The loop's busy time B is every sample of its engine threads that is not a wait for
work (idle); inside it:

    interpreter   Python the loop runs (its scheduler, output handling, glue), the rule's share
    kernel        native model work in the loop's own thread (llama.cpp, transformers run the model there)
    waiting       the loop waiting on its model worker (vLLM's EngineCore for its Worker process): model
                  time from the loop's view, on the step's critical path
    lock          contention (the GIL among it), never a wait for work

A wait for work is idle, never lock; a request waiting behind another for the engine is queueing
(llama-cpp-python's server takes one lock per request), and the verdict says which it saw. The API
server's share of its event loop and its GIL waits are reported beside the loop. Where the model runs
in another process, the step's critical path is: loop work, then waiting on the worker (inside which
the worker's own kernel / Python split is shown when its process was sampled), then back.

Predicted gains: no C twin exists for a foreign engine, so each component gets the Amdahl bound at an
infinite speedup, its share of the loop's busy time ("if the scheduler cost nothing the step would be
X% shorter"), with the Wilson 95% interval of that share (profiler.stats): a bound only. A slowdown run
(`--what-if`, profiler.analysis.probe_slowdown) measures a component's sensitivity instead, and
with_slowdowns() relabels its line: slowdown-measured, with the sensitivity and the gain it predicts.
With Python-only stacks (py-spy without --native) the interpreter share is bounded, not measured: from
the samples whose innermost Python frame is control code (lower) to every Python-innermost sample (upper).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict, cast

from infer_prof.profiler.analysis.breakdown import samples_split
from infer_prof.profiler.analysis.diagnose import (
    REWRITE_FROM,
    RULE_REWRITE,
    RULE_STAY,
    RULE_TARGETED,
    STAY_UP_TO,
    rule_for,
    straddled,
)
from infer_prof.profiler.analysis.sensitivity import unresolved
from infer_prof.profiler.rundir.schema import (
    AmdahlBound,
    ApiThread,
    Breakdown,
    CriticalPath,
    ForeignProcess,
    Interval,
    Metrics,
    Probe,
    ProbeSlowdown,
    ProbeWhatIf,
    SampledThread,
    Verdict,
)
from infer_prof.profiler.stats import wilson_interval

# Components whose Python-innermost samples are the engine's control code, not a line calling a kernel.
CONTROL = ("scheduler", "kv_alloc", "prepare", "tokenizer", "detokenizer", "queue", "api", "sampler")
AMDAHL_COMPONENTS = (
    "scheduler",
    "kv_alloc",
    "prepare",
    "sampler",
    "detokenizer",
    "tokenizer",
    "api",
    "model_glue",
    "none",
)
COMPONENT_WORDS = {
    "none": "the loop's other code",
    "model_glue": "model glue (Python around the kernels)",
    "kv_alloc": "KV allocation",
    "api": "API handling",
    "model_kernels": "model kernels",
}


def _sum_counts(threads: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The threads' counts added up, as one thread's (summarize_stacks's shape plus work, gil, waits, by_category)."""
    out: dict[str, Any] = {
        "samples": 0,
        "work": 0,
        "gil": 0,
        "native_samples": 0,
        "dispatch": 0,
        "categories": {},
        "components": {},
        "waits": {},
        "by_category": {},
        "lock_components": {},
        "gil_components": {},
    }
    for thread in threads:
        counts = thread["counts"]
        for key in ("samples", "work", "gil", "native_samples", "dispatch"):
            out[key] += counts.get(key, 0)
        for key in ("categories", "components", "waits", "by_category", "lock_components", "gil_components"):
            for name, value in (counts.get(key) or {}).items():
                out[key][name] = out[key].get(name, 0) + value
    return out


def loop_counts(threads: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The engine loop's counts from its threads. A pool that takes turns running the loop (llama-cpp-python's
    AnyIO workers run each token on whichever is free) is one loop: while one works the others wait for work,
    so summed they would read idle (N-1)/N of the time whatever the load. When their work fits in one
    thread's samples, the pool is counted as one thread sampled that often: the idle samples beyond it go."""
    out = _sum_counts(threads)
    if len(threads) < 2:
        return out
    instants = max(int(thread["counts"].get("samples", 0)) for thread in threads)
    idle = out["categories"].get("idle", 0)
    excess = min(idle, out["samples"] - max(instants, out["work"]))
    if excess <= 0:
        return out  # the threads worked at the same time: they are not one loop taking turns
    keep = (idle - excess) / idle
    for key, value in list(out["by_category"].items()):
        category, _, component = key.partition("/")
        if category == "idle":
            out["by_category"][key] = value * keep
            out["components"][component] = out["components"].get(component, 0) - value * (1 - keep)
    out["categories"]["idle"] = idle - excess
    if "idle" in out["waits"]:
        out["waits"]["idle"] = max(0.0, out["waits"]["idle"] - excess)
    out["native_samples"] = out["native_samples"] * (out["samples"] - excess) / out["samples"]
    out["samples"] -= excess
    return out


def engine_process(processes: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The process whose engine thread is the engine loop (else a model worker's), the most work first."""

    def work(process: dict[str, Any]) -> int:
        return sum(
            thread["counts"]["work"]
            for thread in process["threads"]
            if thread["thread_id"] in process["engine_threads"]
        )

    for role in ("engine loop", "model worker", None):  # None: a thread standing in, whose job no table names
        found = [
            process
            for process in processes
            if process.get("engine_thread") is not None and (role is None or process["role"] == role)
        ]
        if found:
            return max(found, key=work)
    return None


def engine_threads(process: dict[str, Any]) -> list[dict[str, Any]]:
    return [thread for thread in process["threads"] if thread["thread_id"] in process["engine_threads"]]


def foreign_breakdown(processes: Sequence[dict[str, Any]], wall_ns: int) -> Breakdown:
    """A `breakdown` section from processes (ProcessRoles.as_dict): the engine process's engine threads as the
    samples split, every other thread pooled as client_threads, and the processes themselves."""
    notes: list[str] = []
    chosen = engine_process(processes)
    engine_counts = other_counts = None
    if chosen is not None:
        others = [
            thread["counts"]
            for process in processes
            for thread in process["threads"]
            if not (process is chosen and thread["thread_id"] in chosen["engine_threads"])
        ]
        engine_counts, other_counts = loop_counts(engine_threads(chosen)), _pool(others)
        if not engine_counts["samples"]:
            engine_counts = None
        names = ", ".join(f"{thread['name']} ({thread['thread_id']})" for thread in engine_threads(chosen))
        notes.append(
            f"engine thread{'s' if len(chosen['engine_threads']) > 1 else ''} of pid {chosen['pid']}: {names}, "
            f"chosen by what {'they do' if len(chosen['engine_threads']) > 1 else 'it does'} (its role: "
            f"{chosen['role']}), not by name"
        )
    for process in processes:
        notes.extend(process.get("notes") or [])
    return {
        "wall_s": wall_ns / 1e9,
        "methods": {"spans": None, "samples": samples_split(engine_counts)},
        "disagreement": {},
        "component_disagreement": {},
        "beyond_noise": [],
        "components_beyond_noise": [],
        "client_threads": samples_split(other_counts),
        "notes": notes,
        "processes": list(processes),
    }


def _pool(counts: list[dict[str, Any]]) -> dict[str, Any] | None:
    out = _sum_counts({"counts": entry} for entry in counts)
    return out if out["samples"] else None


def _interval(hits: float, trials: float) -> dict[str, float]:
    interval = wilson_interval(max(0.0, min(hits, trials)), trials)
    return {"share": interval.point, "low": interval.low, "high": interval.high}


def _words(component: str) -> str:
    if component.startswith("worker:"):
        return "the model worker's " + _words(component[len("worker:") :])
    return COMPONENT_WORDS.get(component, component)


def foreign_verdict(processes: Sequence[dict[str, Any]], *, blind_spots: list[str] | None = None) -> Verdict:
    """The result's `verdict` section for a foreign engine (same keys as diagnose(), plus `foreign`)."""
    spots = list(blind_spots or [])
    chosen = engine_process(processes)
    empty: Verdict = {
        "category": None,
        "component": None,
        "share": None,
        "interpreter_share": None,
        "interpreter_interval": None,
        "straddles": [],
        "rule": None,
        "predictions": {},
        "blind_spots": spots,
        "source": None,
    }
    if chosen is None:
        roles = "; ".join(f"pid {p['pid']}: {p['role_words']}" for p in processes) or "no samples"
        return {
            **empty,
            "reasons": [
                (
                    f"No engine loop or model worker was found in the sampled processes ({roles}): "
                    "no verdict. Sample the engine's process (--pid), or all of the server's."
                )
            ],
            "foreign": {"processes": _process_rows(processes)},
        }
    loop = loop_counts(engine_threads(chosen))
    categories = loop["categories"]
    native = chosen.get("resolution") == "native"
    idle = categories.get("idle", 0)
    busy = loop["samples"] - idle
    waits = loop["waits"]
    on_worker = waits.get("worker", 0)
    reasons: list[str] = []
    loop_words = (
        "engine loop"
        if chosen["role"] == "engine loop"
        else "thread running the model (no table names an engine loop in the sampled processes)"
        if chosen["role"] == "model worker"
        else "busiest thread (can't tell which is the engine)"
    )
    if busy <= 0:
        return {
            **empty,
            "reasons": [
                (
                    f"The {loop_words} in pid {chosen['pid']} only waited for work while sampled: "
                    "no verdict; send load while it is sampled."
                )
            ],
            "foreign": {"processes": _process_rows(processes)},
        }

    by_category = loop["by_category"]
    interpreter = categories.get("interpreter", 0)
    if native:
        interval = _interval(interpreter, busy)
        share, low, high = interval["share"], interval["low"], interval["high"]
        method = f"Wilson 95% interval of interpreter samples among the {loop_words}'s {busy:,} busy samples"
    else:
        control = sum(
            count
            for key, count in by_category.items()
            if key.split("/")[0] == "interpreter" and key.split("/")[1] in CONTROL
        )
        low_iv, high_iv = _interval(control, busy), _interval(interpreter, busy)
        low, high = low_iv["low"], high_iv["high"]
        share = (control + interpreter) / 2 / busy
        method = (
            "bounds from Python-only stacks: control-code lines (lower) to every Python-innermost sample "
            "(upper), each with its Wilson 95% interval; native stacks would measure it"
        )
    interval_dict: Interval = {"share": share, "low": low, "high": high, "samples": busy, "method": method}
    unsure = straddled(interval_dict)
    rule = rule_for(share)
    engine_name = chosen.get("engine") or "this engine"
    reasons.append(
        f"The {loop_words} ({chosen['engine'] + ', ' if chosen.get('engine') else ''}pid {chosen['pid']}) spends {share:.1%} of its busy time in the Python "
        f"interpreter ({'native stack samples' if native else 'Python-only samples: a bound, not a measurement'}; "
        f"95% interval [{low:.1%}, {high:.1%}] over {busy:,} busy samples); at about {STAY_UP_TO:.0%} or below the "
        f"rule is '{RULE_STAY}', from {REWRITE_FROM:.0%} '{RULE_REWRITE}', between them '{RULE_TARGETED}', so: {rule}"
        + (
            f" (the interval straddles {' and '.join(f'{t:.0%}' for t in unsure)}: this run cannot tell which side; "
            "sample longer" + ("" if native else ", with native stacks") + ")."
            if unsure
            else "."
        )
    )
    kernel = categories.get("kernel", 0)
    lock = waits.get("lock", 0)
    gil = loop["gil"]
    split_words = [f"{'interpreter' if native else 'Python-innermost lines'} {interpreter / busy:.0%}"]
    if kernel:
        split_words.append(f"kernels {kernel / busy:.0%}")
    if on_worker:
        split_words.append(f"waiting on the model worker {on_worker / busy:.0%}")
    if lock / busy >= 0.005:
        split_words.append(f"lock contention {lock / busy:.0%}")
    if gil / busy >= 0.005:
        split_words.append(f"GIL waits {gil / busy:.0%}")
    rest = busy - interpreter - kernel - on_worker - lock - gil
    if rest / busy >= 0.005:
        split_words.append(f"other {rest / busy:.0%}")
    reasons.append(
        f"Its busy time: {', '.join(split_words)}"
        + (
            f"; it waited for work {idle / loop['samples']:.0%} of its samples (idle, not lock: the offered "
            "load limits it there)."
            if idle
            else "."
        )
    )

    worker = _worker_process(processes, chosen)
    critical: CriticalPath | None = None
    if on_worker:
        critical = {
            "loop_work": (busy - on_worker) / busy,
            "waiting_on_worker": on_worker / busy,
            "worker": None,
        }
        sentence = (
            f"The step's critical path: the loop works {(busy - on_worker) / busy:.0%} of its busy time, "
            f"then waits on the model worker {on_worker / busy:.0%}"
        )
        if worker is not None:
            worker_counts = loop_counts(engine_threads(worker))
            worker_busy = worker_counts["samples"] - worker_counts["categories"].get("idle", 0)
            worker_native = worker.get("resolution") == "native"
            if worker_busy > 0:
                w_cat = worker_counts["categories"]
                critical["worker"] = {
                    "pid": worker["pid"],
                    "busy_samples": worker_busy,
                    # Python-only stacks cannot tell a kernel from the Python line that called it.
                    "kernel": w_cat.get("kernel", 0) / worker_busy if worker_native else None,
                    "interpreter": w_cat.get("interpreter", 0) / worker_busy if worker_native else None,
                    "components": {
                        key: value / worker_busy for key, value in worker_counts["components"].items()
                    },
                }
                if worker_native:
                    sentence += (
                        f" (the worker, pid {worker['pid']}, spends its busy time "
                        f"{w_cat.get('kernel', 0) / worker_busy:.0%} in kernels and "
                        f"{w_cat.get('interpreter', 0) / worker_busy:.0%} in Python)"
                    )
                else:
                    sentence += (
                        f" (the worker, pid {worker['pid']}, was sampled without native stacks: its kernels "
                        "and its Python cannot be told apart)"
                    )
        else:
            sentence += " (the worker's process was not sampled: sample it too for its own split)"
        reasons.append(sentence + ", then back.")
    waits_seen = _waits_seen(processes)
    reasons.extend(waits_seen["sentences"])
    api = _api_section(processes)
    if api is not None:
        reasons.append(api["sentence"])
    amdahl = _amdahl(loop, busy, critical, worker)
    for name, entry in sorted(amdahl.items(), key=lambda item: -item[1]["bound"])[:4]:
        if entry["bound"] >= 0.01:
            reasons.append(
                f"If {_words(name)} cost nothing, the {loop_words}'s step would be at most {entry['bound']:.1%} "
                f"shorter (Amdahl at an infinite speedup, 95% interval {entry['low']:.1%}-{entry['high']:.1%}); "
                + bound_only(engine_name)
            )
    category_counts = {
        "interpreter": interpreter,
        "kernel": kernel,
        "waiting": categories.get("waiting", 0),
        "lock": categories.get("lock", 0),
        "allocation": categories.get("allocation", 0),
        "other": categories.get("other", 0),
        "idle": idle,
    }
    category = max(category_counts, key=lambda key: category_counts[key])
    component = _largest_component(by_category, category)
    if not native:
        spots.append(
            "py-spy ran without --native: the interpreter share is bounded, not measured, and GIL waits are "
            "unseen (sample with native stacks: --profile deep, or a default profile where py-spy may pause "
            "the process)"
        )
    return {
        "category": category,
        "component": component,
        "share": category_counts[category] / loop["samples"],
        "interpreter_share": share,
        "interpreter_interval": interval_dict,
        "straddles": unsure,
        "rule": rule,
        "reasons": reasons,
        "predictions": {},
        "blind_spots": spots,
        "source": "samples",
        "foreign": {
            "engine": chosen.get("engine"),
            "engine_pid": chosen["pid"],
            "engine_threads": chosen["engine_threads"],
            "loop": {
                "samples": loop["samples"],
                "busy": busy,
                "idle": idle / loop["samples"],
                "interpreter": interpreter / busy,
                "kernel": kernel / busy,
                "waiting_on_worker": on_worker / busy,
                "lock": lock / busy,
                "gil": gil / busy if native else None,
            },
            "critical_path": critical,
            "waits": waits_seen["shares"],
            "api": api,
            "amdahl": amdahl,
            "amdahl_note": "bounds at an infinite speedup (no C twin exists for this engine to verify them)",
            "processes": _process_rows(processes),
        },
    }


BOUND_ONLY = "bound only (Amdahl)"


def bound_only(engine: str) -> str:
    """How a bound's line ends: what it is, and why nothing checked it."""
    return f"{BOUND_ONLY}: {engine} has no C twin here, and no slowdown measured it (--what-if would)."


def slowdown_measured(entry: ProbeSlowdown) -> str:
    """How a line measured by a slowdown says so: its sensitivity with its interval, and the gain it predicts."""
    why = unresolved(entry.get("low"), entry.get("high"), entry.get("pairs", 0))
    words = f"{'slowdown unresolved' if why else 'slowdown-measured'} (sensitivity {entry['sensitivity']:.2f}"
    if entry.get("low") is not None and entry.get("high") is not None:
        words += f" [{entry['low']:.2f}, {entry['high']:.2f}]"
    words += ")"
    gain = entry.get("gain")
    if gain is not None:
        interval = (
            f" [{gain['low']:.1%}, {gain['high']:.1%}]"
            if gain.get("low") is not None and gain.get("high") is not None
            else ""
        )
        words += f": {gain['speedup']:g}x faster, it would save {gain['gain']:.1%}{interval} of the " + (
            "step" if entry.get("path") == "step" else f"time per {entry.get('units', 'steps')[:-1]}"
        )
    if entry.get("linear") is False:
        words += " (its levels disagree: a curve, so this holds near the levels tried)"
    if why is not None:
        words += f"; {why}"
    return words + "."


def with_slowdowns(verdict: Verdict, what_if: ProbeWhatIf | None) -> None:
    """Mark each of the foreign verdict's predictions with how it was obtained: a component a slowdown run measured
    gets its sensitivity and predicted gain in place of "bound only"; every other keeps its Amdahl bound."""
    foreign = verdict.get("foreign") or {}
    amdahl = foreign.get("amdahl") or {}
    engine = foreign.get("engine") or "this engine"
    measured = {
        name: entry
        for name, entry in ((what_if or {}).get("components") or {}).items()
        if entry.get("sensitivity") is not None
    }
    tail = bound_only(engine)
    reasons = list(verdict.get("reasons") or [])
    for name, bound in amdahl.items():
        entry = measured.get(name.removeprefix("worker:"))
        bound["method"] = BOUND_ONLY if entry is None else slowdown_measured(entry).removesuffix(".")
        if entry is None:
            continue
        start = f"If {_words(name)} cost nothing,"
        reasons = [
            reason.replace(tail, slowdown_measured(entry)) if reason.startswith(start) else reason
            for reason in reasons
        ]
    verdict["reasons"] = reasons


def _largest_component(by_category: dict[str, int], category: str) -> str | None:
    found = {
        key.split("/", 1)[1]: count for key, count in by_category.items() if key.split("/", 1)[0] == category
    }
    found.pop("none", None)
    return max(found, key=lambda key: found[key]) if found else None


def _worker_process(processes: Sequence[dict[str, Any]], chosen: dict[str, Any]) -> dict[str, Any] | None:
    workers = [
        process for process in processes if process is not chosen and process["role"] == "model worker"
    ]
    return max(workers, key=lambda p: sum(t["counts"]["work"] for t in engine_threads(p)), default=None)


class WaitsSeen(TypedDict):
    shares: dict[str, float]  # wait kind -> share of every sampled thread's samples
    sentences: list[str]


def _waits_seen(processes: Sequence[dict[str, Any]]) -> WaitsSeen:
    """Which waits the run saw, over every thread: for work (idle), behind another request (queueing), contention."""
    idle = queueing = contention = client = total = 0
    for process in processes:
        for thread in process["threads"]:
            waits = thread["counts"].get("waits") or {}
            total += thread["counts"]["samples"]
            idle += waits.get("idle", 0)
            queueing += waits.get("queueing", 0)
            client += waits.get("client", 0)
            contention += waits.get("lock", 0)
    shares = {
        "idle": idle / total if total else 0.0,
        "queueing": queueing / total if total else 0.0,
        "client": client / total if total else 0.0,
        "lock": contention / total if total else 0.0,
    }
    sentences = []
    waited = idle + queueing + contention + client
    if waited:
        parts = []
        if client:
            parts.append(f"request handlers waiting for their next token {client / waited:.0%}")
        if queueing:
            parts.append(f"requests queueing behind one another for the engine {queueing / waited:.0%}")
        if idle:
            parts.append(f"threads waiting for work (idle) {idle / waited:.0%}")
        if contention / waited >= 0.005:
            parts.append(f"lock contention {contention / waited:.0%}")
        sentences.append(
            "Of the samples that waited, in every sampled thread: "
            + ", ".join(parts)
            + "."
            + (
                " Queueing is requests waiting behind a busy engine (one request at a time), not a "
                "thread short of work."
                if queueing
                else " No thread was seen waiting behind another request; a server that queues requests on an "
                "asyncio or anyio lock (llama-cpp-python 0.3 does) makes them wait on its event loop, "
                "where stack samples cannot see them: the client's TTFT shows that wait."
            )
        )
    return {"shares": shares, "sentences": sentences}


def _api_section(processes: Sequence[dict[str, Any]]) -> ApiThread | None:
    """The API / event-loop thread with the most work: its busy share and GIL waits."""
    candidates = [
        (process, thread) for process in processes for thread in process["threads"] if thread["role"] == "api"
    ]
    if not candidates:
        return None
    # The event loop itself first (a request handler in a pool thread is api code too, but not the loop).
    process, thread = max(
        candidates, key=lambda pair: (bool(pair[1].get("event_loop")), pair[1]["counts"]["work"])
    )
    counts = thread["counts"]
    busy = counts["work"] / counts["samples"] if counts["samples"] else 0.0
    gil = thread.get("gil_wait")
    sentence = (
        f"The API server's event loop ({thread['name']}, pid {process['pid']}) worked {busy:.1%} of its samples"
        + (f", {gil:.1%} waiting for the GIL" if gil is not None else " (GIL waits need native stacks)")
        + "."
    )
    return {
        "pid": process["pid"],
        "thread_id": thread["thread_id"],
        "work_share": busy,
        "gil_wait": gil,
        "components": thread.get("components"),
        "sentence": sentence,
    }


def _amdahl(
    loop: dict[str, Any], busy: int, critical: CriticalPath | None, worker: dict[str, Any] | None
) -> dict[str, AmdahlBound]:
    """Per component, the share of the loop's busy time it takes (the Amdahl bound at infinite speedup) and
    its Wilson interval; a worker's components scaled by the loop's wait on the worker."""
    out: dict[str, AmdahlBound] = {}
    waiting = loop["waits"].get("worker", 0)
    for name in AMDAHL_COMPONENTS:
        count = sum(
            value
            for key, value in loop["by_category"].items()
            if key.split("/", 1)[1] == name and key.split("/", 1)[0] not in ("idle", "waiting")
        )
        if count:
            interval = _interval(count, busy)
            out[name] = {
                "bound": interval["share"],
                "low": interval["low"],
                "high": interval["high"],
                "samples": count,
                "where": "engine loop",
                "method": BOUND_ONLY,
            }
    worker_split = critical.get("worker") if critical else None
    if worker_split and worker is not None and waiting:
        worker_counts = loop_counts(engine_threads(worker))
        worker_busy = worker_split["busy_samples"]
        wait_iv = _interval(waiting, busy)
        for name in ("sampler", "prepare", "model_glue", "model_kernels"):
            count = sum(
                value
                for key, value in worker_counts["by_category"].items()
                if key.split("/", 1)[1] == name and key.split("/", 1)[0] not in ("idle", "waiting")
            )
            if count:
                part = _interval(count, worker_busy)
                key = f"worker:{name}"
                out[key] = {
                    "bound": wait_iv["share"] * part["share"],
                    "low": wait_iv["low"] * part["low"],
                    "high": min(1.0, wait_iv["high"] * part["high"]),
                    "samples": count,
                    "where": f"model worker pid {worker['pid']}",
                    "method": BOUND_ONLY,
                }
    return out


def _process_rows(processes: Sequence[dict[str, Any]]) -> list[ForeignProcess]:
    """One row per process: pid, role, engine, engine thread, and each thread's role and split (counts left out)."""
    return [
        {
            "pid": process["pid"],
            "role": process["role"],
            "role_words": process.get("role_words"),
            "engine": process.get("engine"),
            "engine_thread": process.get("engine_thread"),
            "resolution": process.get("resolution"),
            "threads": [  # analysis.roles's thread rows, less their counts: SampledThread
                cast(SampledThread, {key: value for key, value in thread.items() if key != "counts"})
                for thread in process["threads"]
            ],
        }
        for process in processes
    ]


# A first token that took this many times a later token's time, while the loop was busy, waited for its turn.
QUEUED_TTFT_OVER_TPOT = 20.0
BUSY_LOOP = (
    0.8  # the loop's busy share of its samples above which waits for work cannot explain a slow first token
)


def queueing_reason(verdict: Verdict, metrics: Metrics) -> str | None:
    """What the client saw that samples cannot: with the loop busy and the first token many tokens' time late,
    requests queued behind one another (on a lock or an event loop), rather than the loop waiting for work."""
    loop = ((verdict.get("foreign") or {}).get("loop")) or {}
    ttft = (metrics.get("ttft_ms") or {}).get("p50")
    tpot = (metrics.get("tpot_ms") or {}).get("p50")
    idle = loop.get("idle")
    if not (
        isinstance(ttft, (int, float)) and isinstance(tpot, (int, float)) and tpot > 0 and idle is not None
    ):
        return None
    if 1 - idle < BUSY_LOOP or ttft < QUEUED_TTFT_OVER_TPOT * tpot:
        return None
    return (
        f"Requests queued behind one another: the engine loop was busy {1 - idle:.0%} of its samples, and a "
        f"request's first token took {ttft:,.0f} ms (p50), {ttft / tpot:,.0f}x the {tpot:.1f} ms of each later "
        "token; what waits here is the requests, not the loop."
    )


def with_probe_bound(verdict: Verdict, probe: Probe | None) -> None:
    """Where the probe timed the engine loop's own work (probe_spans.loop_work_ms: its steps' exclusive time and its
    calls that are not waits), that share of step time bounds the loop's interpreter share from above: the verdict's
    interval keeps the samples' lower end and takes the lower of the two upper ends. Each method then stands at half
    the miss rate (the samples' Wilson interval at 97.5%, the probe's bound one-sided at 97.5%), so the joined
    interval still covers at 95%; where the bound lies below the samples' lower end the methods disagree, the
    samples' interval stays, and the reasons say so. The straddled thresholds and the rule follow the new interval."""
    interval = verdict.get("interpreter_interval") or {}
    work = ((probe or {}).get("steps") or {}).get("loop_work") or {}
    bound, steps = work.get("high"), ((probe or {}).get("steps") or {}).get("with_probes_on")
    given_low, given_high = interval.get("low"), interval.get("high")
    if bound is None or given_low is None or given_high is None:
        return
    samples, share = interval.get("samples") or 0, interval.get("share") or 0.0
    low, high = float(given_low), float(given_high)
    if samples and (interval.get("method") or "").startswith("Wilson"):
        wider = wilson_interval(round(share * samples), samples, confidence=0.975)
        low, high = wider.low, wider.high
    said = (
        f"The probe timed the loop's own work at {work.get('ms_per_step', 0.0):.2f} ms a step, {work.get('share', 0.0):.1%} "
        f"of step time (at most {bound:.1%}, 95% bootstrap interval over {steps or 0:,} steps): an upper bound on its "
        "interpreter time"
    )
    reasons = list(verdict.get("reasons") or [])
    if bound < low:
        reasons.append(
            f"{said}, below the samples' interval: the two methods disagree; the samples' interval stays."
        )
        verdict["reasons"] = reasons
        return
    joined_high = min(high, bound)
    joined: Interval = {
        **interval,
        "low": low,
        "high": joined_high,
        "method": (
            f"{interval.get('method')}, at 97.5%, its upper end lowered to the probe's bound on the loop's own work "
            "(one-sided 97.5%): together 95%"
        ),
    }
    verdict["interpreter_interval"] = joined
    unsure = straddled(joined)
    verdict["straddles"] = unsure
    point = min(share, joined_high)
    verdict["rule"] = rule_for(point)
    settled = (
        f"; with it the interval is [{low:.1%}, {joined_high:.1%}], which clears the rule's thresholds: {rule_for(point)}."
        if not unsure
        else f"; with it the interval is [{low:.1%}, {joined_high:.1%}], still straddling "
        f"{' and '.join(f'{t:.0%}' for t in unsure)}."
    )
    reasons.append(said + settled)
    verdict["reasons"] = reasons
