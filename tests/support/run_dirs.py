"""Fabricates realistic run directories (profiler.rundir.results schema) for report, compare and budget tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from infer_prof.profiler.rundir.atomic import write_atomic, write_text_atomic
from infer_prof.profiler.rundir.results import RunResult, write_run

# The phases the engine thread spends a step in, with (base ms, ms per running sequence, ms per
# prefill token): shaped like a small CPU model where the forward pass dominates and the Python
# control paths take a few percent each.
PHASE_COSTS = {
    "queue": (0.04, 0.002, 0.0),
    "scheduler": (0.35, 0.030, 0.0),
    "kv_alloc": (0.06, 0.012, 0.0),
    "prepare": (0.05, 0.010, 0.001),
    "model": (5.5, 0.42, 0.004),
    "sampler": (0.20, 0.060, 0.0),
    "detokenizer": (0.08, 0.025, 0.0),
}
BLOCK_SIZE = 16
NUM_KV_BLOCKS = 2048
MAX_NUM_SEQS = 48
START_NS = 1_000_000_000_000  # a monotonic clock does not start at zero; neither do real runs
TTFT_SLO_MS = 2000.0
TPOT_SLO_MS = 50.0


def make_run_dir(
    path: str | Path,
    *,
    seed: int,
    throughput_scale: float = 1.0,
    n_requests: int = 120,
    n_steps: int = 400,
    with_breakdown: bool = True,
    with_samples: bool = True,
    verify: bool = True,
    deep: bool = False,
) -> Path:
    """Write a complete run directory at `path` and return it.

    The engine is simulated at step granularity: requests arrive at step indices, join the batch
    when there is room, produce one token per step, and every step's duration is the sum of its
    phases (scaled down by `throughput_scale`). Metrics, engine figures and the breakdown are
    computed from those tables, so every section agrees with the per-step and per-request rows.
    `with_samples` adds a py-spy `samples.txt` and the samples method; `verify` adds measured gains.
    With a breakdown the spans are written too (spans.csv, at their real times: phases in engine order
    with the loop's own code between them); `deep` adds torch ops in two windows (kernel_events.csv).
    """
    if n_requests < 1 or n_steps < 10:
        raise ValueError("make_run_dir needs n_requests >= 1 and n_steps >= 10")
    rng = np.random.default_rng(seed)
    requests, steps = _simulate(rng, n_requests=n_requests, n_steps=n_steps, scale=throughput_scale)
    result = RunResult(
        config=_config(seed, n_requests, with_breakdown, with_samples, verify),
        environment=_environment(),
        scenario={
            "name": "chat-poisson",
            "arrival": "poisson",
            "rate_rps": round(n_requests / 60, 2),
            "prompt_tokens": {"min": 32, "max": 480},
            "output_tokens": {"min": 8, "max": 160},
        },
        metrics=_metrics(requests),
        engine=_engine(steps),
        counters={
            "python_calls_per_token": round(float(rng.normal(410, 8)), 1),
            "native_calls_per_step": 0,
            "torch_ops_per_step": 212,
            "allocations_per_step": 37,
        },
        collectors=_collectors(with_breakdown, with_samples),
        overhead={
            "throughput_ratio": 0.965,
            "method": "same scenario with collectors off vs on",
            "collectors": {"spans": 0.021, "gc": 0.002, **({"py-spy": 0.012} if with_samples else {})},
        },
    )
    if with_breakdown:
        result.breakdown = _breakdown(rng, steps, with_samples)
        result.verdict = _verdict(result.breakdown, verify)
    run_path = Path(path)
    run_path.mkdir(parents=True, exist_ok=True)
    if with_samples:
        from infer_prof.profiler.session.record import sample_labels

        raw = _collapsed_stacks(rng, steps)
        write_text_atomic(run_path / "samples.txt", raw)
        # Labelled by the profiler's own classifier, as a real session does.
        labels = sample_labels(raw, engine_thread_id=4242)
        write_atomic(run_path / "sample_labels.csv", lambda handle: labels.to_csv(handle, index=False))
        result.files.update(samples="samples.txt", sample_labels="sample_labels.csv")
    if with_breakdown:
        spans = _spans(steps)
        write_atomic(run_path / "spans.csv", lambda handle: spans.to_csv(handle, index=False))
        result.files["spans"] = "spans.csv"
        if deep:
            ops = _kernel_events(spans)
            write_atomic(run_path / "kernel_events.csv", lambda handle: ops.to_csv(handle, index=False))
            result.files["kernel_events"] = "kernel_events.csv"
            result.config["profile"] = "deep"
    return write_run(run_path, result, requests, steps)


def _spans(steps: pd.DataFrame) -> pd.DataFrame:
    """spans.csv of the simulated engine thread: each step, and its phases in engine order with the step's
    time outside every phase spread evenly in the gaps between them."""
    rows = []
    for step in steps.to_dict("records"):
        start, end = int(step["start_ns"]), int(step["end_ns"])
        rows.append((int(step["step"]), "step", start, end, 0))
        phase_ns = [(name, int(step[f"{name}_ms"] * 1e6)) for name in PHASE_COSTS]
        gap = max(0, (end - start - sum(ns for _, ns in phase_ns)) // (len(phase_ns) + 1))
        cursor = start + gap
        for name, ns in phase_ns:
            rows.append((int(step["step"]), name, cursor, min(end, cursor + ns), 1))
            cursor = min(end, cursor + ns + gap)
    return pd.DataFrame(rows, columns=["step", "name", "start_ns", "end_ns", "depth"])


KERNEL_WINDOWS = ((20, 3), (60, 3))  # (first step, steps) of the simulated torch.profiler windows
_MODEL_OPS = (
    ("aten::linear", "aten::addmm"),
    ("aten::silu", None),
    ("aten::mul", None),
    ("aten::linear", "aten::addmm"),
)


def _kernel_events(spans: pd.DataFrame) -> pd.DataFrame:
    """Ops laid across each windowed step's model span; the last ends 2 us past it, as alignment can leave it."""
    rows = []
    model = spans[spans["name"] == "model"].set_index("step")
    for window, (first, count) in enumerate(KERNEL_WINDOWS):
        for step in range(first, first + count):
            if step not in model.index:
                continue
            begin, end = int(model.loc[step, "start_ns"]), int(model.loc[step, "end_ns"])
            each = (end - begin) // len(_MODEL_OPS)
            for index, (op, child) in enumerate(_MODEL_OPS):
                op_start = begin + index * each + 1_000
                op_end = op_start + each - 2_000 + (4_000 if index == len(_MODEL_OPS) - 1 else 0)
                rows.append((window, step, op, op_start, op_end, 0, "model"))
                if child:
                    rows.append((window, step, child, op_start + 500, op_end - 500, 1, "model"))
    return pd.DataFrame(rows, columns=["window", "step", "name", "start_ns", "end_ns", "depth", "span"])


def _simulate(
    rng: np.random.Generator, *, n_requests: int, n_steps: int, scale: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    # Arrivals land in the first 85% of the steps so most requests finish inside the run.
    arrival_step = np.sort(rng.integers(0, max(1, int(n_steps * 0.85)), size=n_requests))
    arrival_step[0] = 0
    prompt_tokens = rng.integers(32, 480, size=n_requests)
    output_tokens = rng.integers(8, 160, size=n_requests)
    # The last arrival runs to the end of the run, so the engine never steps with an empty batch.
    output_tokens[-1] = max(int(output_tokens[-1]), n_steps - int(arrival_step[-1]) + 1)
    stops_at_eos = rng.random(n_requests) < 0.7
    priority = rng.choice([0, 0, 0, 1], size=n_requests)
    failed_index = n_requests // 2 if n_requests >= 50 else -1

    waiting: list[int] = []
    running: dict[int, int] = {}  # request index -> tokens generated so far
    next_arrival = 0
    step_start = START_NS
    arrival_ns = np.zeros(n_requests, dtype=np.int64)
    scheduled_ns = np.zeros(n_requests, dtype=np.int64)
    preemptions = np.zeros(n_requests, dtype=np.int64)
    token_times: list[list[int]] = [[] for _ in range(n_requests)]
    finish_ns = np.zeros(n_requests, dtype=np.int64)
    done = np.zeros(n_requests, dtype=bool)
    step_rows = []
    previous_end = START_NS - 2_000_000
    for step in range(n_steps):
        while next_arrival < n_requests and arrival_step[next_arrival] <= step:
            # A request arrives while the previous step runs (or just before the first).
            arrival_ns[next_arrival] = previous_end - int(rng.uniform(0.0, 1.0) * 1_500_000)
            waiting.append(next_arrival)
            next_arrival += 1
        if not running and not waiting and next_arrival < n_requests:
            # An engine does not step when idle: pull the next arrival forward instead.
            arrival_ns[next_arrival] = previous_end
            waiting.append(next_arrival)
            next_arrival += 1
        prefill_tokens = 0
        while waiting and len(running) < MAX_NUM_SEQS:
            index = waiting.pop(0)
            # A preempted request is recomputed: it keeps the tokens it already produced.
            running[index] = len(token_times[index])
            scheduled_ns[index] = scheduled_ns[index] or step_start
            prefill_tokens += int(prompt_tokens[index])
        batch = len(running)
        phase_ms = {
            name: (base + per_seq * batch + per_token * prefill_tokens) * rng.lognormal(0.0, 0.08) / scale
            for name, (base, per_seq, per_token) in PHASE_COSTS.items()
        }
        unattributed_ms = rng.uniform(0.02, 0.08) / scale  # loop overhead outside any span
        duration_ms = sum(phase_ms.values()) + unattributed_ms
        step_end = step_start + int(duration_ms * 1e6)
        used_blocks, used_slots, step_preemptions = _kv_step(
            running, waiting, prompt_tokens, scheduled_ns, preemptions
        )
        finished_now = []
        for index, tokens in running.items():
            running[index] = tokens + 1
            token_times[index].append(step_end)
            is_last_step = step == n_steps - 1
            if (
                running[index] >= output_tokens[index]
                or is_last_step
                or (index == failed_index and running[index] >= 4)
            ):
                finished_now.append(index)
        for index in finished_now:
            running.pop(index)
            done[index] = True
            finish_ns[index] = step_end
        step_rows.append(
            {
                "step": step,
                "start_ns": step_start,
                "end_ns": step_end,
                "duration_ms": duration_ms,
                "batch_size": batch,
                "prefill_tokens": prefill_tokens,
                "decode_tokens": batch,
                "blocks_used": used_blocks,
                "blocks_free": NUM_KV_BLOCKS - used_blocks,
                "kv_utilization": used_blocks / NUM_KV_BLOCKS,
                "fragmentation_slots": used_blocks * BLOCK_SIZE - used_slots,
                "preemptions": step_preemptions,
                "waiting": len(waiting),
                "running": len(running),
                **{f"{name}_ms": value for name, value in phase_ms.items()},
            }
        )
        previous_end = step_end
        step_start = step_end + int(rng.uniform(0.03, 0.12) * 1e6 / scale)

    requests = _request_rows(
        token_times,
        done,
        failed_index,
        stops_at_eos,
        priority,
        prompt_tokens,
        arrival_ns,
        scheduled_ns,
        finish_ns,
        preemptions,
    )
    return requests, pd.DataFrame(step_rows)


def _kv_step(
    running: dict[int, int],
    waiting: list[int],
    prompt_tokens: np.ndarray,
    scheduled_ns: np.ndarray,
    preemptions: np.ndarray,
) -> tuple[int, int, int]:
    """Blocks and slots the running requests hold; near a full pool the newest is preempted (recompute)."""
    used_blocks = sum(-(-(int(prompt_tokens[i]) + tokens + 1) // BLOCK_SIZE) for i, tokens in running.items())
    used_slots = sum(int(prompt_tokens[i]) + tokens + 1 for i, tokens in running.items())
    if used_blocks > 0.97 * NUM_KV_BLOCKS and len(running) > 1:
        newest = max(running, key=lambda i: scheduled_ns[i])
        running.pop(newest)
        waiting.insert(0, newest)
        preemptions[newest] += 1
        return used_blocks, used_slots, 1
    return used_blocks, used_slots, 0


def _request_rows(
    token_times: list[list[int]],
    done: np.ndarray,
    failed_index: int,
    stops_at_eos: np.ndarray,
    priority: np.ndarray,
    prompt_tokens: np.ndarray,
    arrival_ns: np.ndarray,
    scheduled_ns: np.ndarray,
    finish_ns: np.ndarray,
    preemptions: np.ndarray,
) -> pd.DataFrame:
    """requests.csv rows of the simulated requests: finished, failed (one), or aborted at the run's end."""
    n_requests = len(token_times)
    request_rows = []
    for index in range(n_requests):
        times = token_times[index]
        ok = bool(done[index] and times) and index != failed_index
        generated = len(times)
        first = times[0] if times else None
        finish = int(finish_ns[index]) if done[index] else None
        if not done[index] and index != failed_index:
            finish_reason, error = "aborted", "run ended before the request finished"
        elif index == failed_index:
            finish_reason, error = "error", "detokenizer raised UnicodeDecodeError (synthetic failure)"
        else:
            finish_reason, error = ("stop" if stops_at_eos[index] else "length"), None
        request_rows.append(
            {
                "request_id": f"req-{index:05d}",
                "index": index,
                "priority": int(priority[index]),
                "warmup": index < 2,
                "ok": ok and done[index],
                "finish_reason": finish_reason,
                "error": error,
                "prompt_tokens": int(prompt_tokens[index]),
                "output_tokens": generated,
                "arrival_ns": int(arrival_ns[index]),
                "scheduled_ns": int(scheduled_ns[index]) or None,
                "first_token_ns": first,
                "finish_ns": finish,
                "ttft_ms": (first - arrival_ns[index]) / 1e6 if first else None,
                "tpot_ms": (finish - first) / 1e6 / (generated - 1)
                if finish and first and generated > 1
                else None,
                "e2e_ms": (finish - arrival_ns[index]) / 1e6 if finish else None,
                "queue_ms": (scheduled_ns[index] - arrival_ns[index]) / 1e6 if scheduled_ns[index] else None,
                "num_preemptions": int(preemptions[index]),
                "token_ns": " ".join(str(t) for t in times),
            }
        )
    return pd.DataFrame(request_rows)


def _latency(values: np.ndarray) -> dict[str, float] | None:
    if values.size == 0:
        return None
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def _metrics(requests: pd.DataFrame) -> dict:
    measured = requests[requests["ok"] & ~requests["warmup"]]
    duration_s = (requests["finish_ns"].max() - requests["arrival_ns"].min()) / 1e9
    itl = np.concatenate(
        [np.diff(np.array([int(t) for t in cell.split()])) / 1e6 for cell in measured["token_ns"]]
    )
    good = measured[(measured["ttft_ms"] <= TTFT_SLO_MS) & (measured["tpot_ms"].fillna(0) <= TPOT_SLO_MS)]
    return {
        "completed": len(measured),
        "failed": int((~requests["ok"]).sum()),
        "request_throughput": len(measured) / duration_s,
        "output_token_throughput": float(measured["output_tokens"].sum()) / duration_s,
        "total_token_throughput": float((measured["output_tokens"] + measured["prompt_tokens"]).sum())
        / duration_s,
        "goodput": len(good) / duration_s,
        **{
            name: _latency(measured[name].dropna().to_numpy(dtype=float))
            for name in ("ttft_ms", "tpot_ms", "e2e_ms", "queue_ms")
        },
        "itl_ms": _latency(itl),
        "duration_s": float(duration_s),
        "slo": {"ttft_ms": TTFT_SLO_MS, "tpot_ms": TPOT_SLO_MS},
    }


def _engine(steps: pd.DataFrame) -> dict:
    def mean_max(column: str) -> dict[str, float]:
        return {"mean": float(steps[column].mean()), "max": float(steps[column].max())}

    return {
        "steps": len(steps),
        "preemptions": int(steps["preemptions"].sum()),
        "blocks_total": NUM_KV_BLOCKS,
        "blocks_free_at_end": int(steps["blocks_free"].iloc[-1]),
        "batch_size": mean_max("batch_size"),
        "kv_utilization": mean_max("kv_utilization"),
        "fragmentation_slots": mean_max("fragmentation_slots"),
    }


def _normalized(shares: dict[str, float]) -> dict[str, float]:
    total = sum(shares.values())
    return {name: value / total for name, value in shares.items()}


def _breakdown(rng: np.random.Generator, steps: pd.DataFrame, with_samples: bool) -> dict:
    wall_ms = (steps["end_ns"].iloc[-1] - steps["start_ns"].iloc[0]) / 1e6
    phase = {name: float(steps[f"{name}_ms"].sum()) / wall_ms for name in PHASE_COSTS}
    components = {
        "scheduler": phase["scheduler"],
        "sampler": phase["sampler"],
        "kv_alloc": phase["kv_alloc"],
        "prepare": phase["prepare"],
        "tokenizer": 0.004,
        "detokenizer": phase["detokenizer"],
        "model_glue": phase["model"] * 0.22,
        "model_kernels": phase["model"] * 0.78,
        "d2h": 0.0,
        "queue": phase["queue"],
        "api": 0.0,
    }
    control = sum(
        phase[name] for name in ("scheduler", "sampler", "kv_alloc", "prepare", "detokenizer", "queue")
    )
    interpreter = control * 0.85 + components["model_glue"] * 0.6
    categories = {
        "interpreter": interpreter,
        "lock": 0.012,
        "allocation": control * 0.08 + 0.01,
        "kernel": components["model_kernels"],
        "idle": max(0.0, 1.0 - sum(phase.values()) - 0.01),
        "waiting": 0.0,
        "other": 0.02,
    }
    spans = {
        "categories": _normalized(categories),
        "components": components,
        "dispatch": components["model_glue"] * 0.5,
    }
    methods: dict = {"spans": spans, "samples": None}
    disagreement: dict[str, float] = {}
    component_disagreement: dict[str, float] = {}
    if with_samples:
        noisy = {name: value * float(rng.lognormal(0.0, 0.12)) for name, value in categories.items()}
        samples = {
            "categories": _normalized(noisy),
            "components": {
                name: value * float(rng.lognormal(0.0, 0.1)) for name, value in components.items()
            },
            "dispatch": spans["dispatch"] * 1.1,
        }
        methods["samples"] = samples
        # Samples minus spans in percentage points, signed, as profiler/analysis/breakdown.py records it.
        disagreement = {
            name: round((samples["categories"][name] - spans["categories"][name]) * 100, 2)
            for name in categories
        }
        component_disagreement = {
            name: round((samples["components"][name] - components[name]) * 100, 2) for name in components
        }
    client = {
        "categories": {
            "interpreter": 0.05,
            "lock": 0.01,
            "allocation": 0.005,
            "kernel": 0.0,
            "idle": 0.06,
            "waiting": 0.87,
            "other": 0.005,
        },
        "components": dict.fromkeys(components, 0.0) | {"queue": 0.03, "tokenizer": 0.02},
        "dispatch": 0.0,
    }
    return {
        "wall_s": wall_ms / 1e3,
        "methods": methods,
        "disagreement": disagreement,
        "component_disagreement": component_disagreement,
        "client_threads": client,
    }


# Measured native speedups of each control path in isolation (what the C twin did per call).
NATIVE_SPEEDUP = {"scheduler": 9.0, "sampler": 14.0, "kv_alloc": 6.0, "prepare": 10.0}


# How far the two Python runs of a simulated --verify differ (busy time per token, max/min - 1): enough
# that the smallest measured gains fall inside the noise, as they do on a shared machine.
VERIFY_SPREAD = 0.02


def _verdict(breakdown: dict, verify: bool) -> dict:
    spans = breakdown["methods"]["spans"]
    interpreter_share = spans["categories"]["interpreter"]
    if interpreter_share <= 0.02:
        rule = "stay in Python"
    elif interpreter_share >= 0.30:
        rule = "native rewrite pays"
    else:
        rule = "targeted native paths"
    predictions = {}
    for component, speedup in NATIVE_SPEEDUP.items():
        share = spans["components"][component]
        predicted = 1.0 / (1.0 - share + share / speedup) - 1.0
        # A verify run switches each twin on; its measured gain lands near the Amdahl prediction.
        measured = predicted * (0.8 + 0.1 * len(component) / 8) if verify else None
        predictions[component] = {
            "share": share,
            "native_speedup": speedup,
            "predicted_gain": predicted,
            "measured_gain": measured,
        }
    top = max(NATIVE_SPEEDUP, key=lambda name: spans["components"][name])
    return {
        "category": max(spans["categories"], key=spans["categories"].get),
        "component": top,
        "share": spans["components"][top],
        "interpreter_share": interpreter_share,
        "rule": rule,
        "reasons": [
            f"interpreter time is {interpreter_share:.1%} of the engine thread (rule: 1% stay, 30% rewrite)",
            f"{top} is the largest control path at {spans['components'][top]:.1%} of wall time",
            f"model kernels take {spans['components']['model_kernels']:.1%}: native control paths cannot touch them",
        ],
        "predictions": predictions,
        "blind_spots": ["GIL waits inside torch ops are counted as kernel time"],
        **(
            {"verify": {"python_runs": 2, "python_spread": VERIFY_SPREAD, "components": {}, "skipped": {}}}
            if verify
            else {}
        ),
    }


def _config(seed: int, n_requests: int, with_breakdown: bool, with_samples: bool, verify: bool) -> dict:
    collectors = ["spans", "gc", "torch_profiler"] + (["py-spy"] if with_samples else [])
    return {
        "model": "synthetic:tiny",
        "model_source": "seeded random weights",
        "dtype": "float32",
        "native": [],
        "scenario": "chat-poisson",
        "seed": seed,
        "requests": n_requests,
        "duration_s": 60,
        "engine": {
            "block_size": BLOCK_SIZE,
            "kv_blocks": NUM_KV_BLOCKS,
            "max_batch": MAX_NUM_SEQS,
            "max_batched_tokens": 4096,
            "policy": "fcfs",
        },
        "collectors": collectors if with_breakdown else [],
        "verify": verify,
        "profile": "default" if with_breakdown else "off",
    }


def _environment() -> dict:
    return {
        "python": "3.11.2",
        "platform": "Linux-6.1.0-x86_64-with-glibc2.36",
        "cpu_model": "Synthetic CPU @ 2.0GHz",
        "cpu_count": 2,
        "torch_version": "2.5.1+cpu",
        "torch_threads": 2,
        "gpu": None,
        "git_revision": "0123456789abcdef0123456789abcdef01234567",
        "infer_prof_version": "0.1.0",
    }


def _collectors(with_breakdown: bool, with_samples: bool) -> dict:
    if not with_breakdown:
        off = {"status": "skipped", "reason": "--profile off"}
        return {"spans": off, "gc": off, "torch_profiler": off, "py-spy": off, "nvml": off}
    return {
        "spans": {"status": "ok", "reason": None},
        "gc": {"status": "ok", "reason": None},
        "torch_profiler": {"status": "ok", "reason": None},
        "py-spy": {"status": "ok", "reason": None}
        if with_samples
        else {
            "status": "skipped",
            "reason": "ptrace not permitted (kernel.yama.ptrace_scope=1); run as root or set it to 0",
        },
        "nvml": {"status": "skipped", "reason": "no NVIDIA GPU found"},
    }


# Leaf frames per phase, as py-spy --native names them; the innermost frame decides the category.
ENGINE_THREAD = "thread (4242): infer-prof-engine"
_STACK_BASE = "Thread._bootstrap (threading.py:995);Thread._bootstrap_inner (threading.py:1038);Engine._run (engine/engine.py:141)"
_PHASE_STACKS = {
    "scheduler": [
        "Engine._step (engine/engine.py:97);PythonScheduler.schedule (engine/scheduler.py:58)",
        "Engine._step (engine/engine.py:97);PythonScheduler.schedule (engine/scheduler.py:58);PythonScheduler._can_append (engine/scheduler.py:121)",
    ],
    "kv_alloc": [
        "Engine._step (engine/engine.py:103);PythonKVAllocator.step (engine/kv_alloc.py:77);PythonKVAllocator._pop_free (engine/kv_alloc.py:40)",
        "Engine._step (engine/engine.py:103);PythonKVAllocator.step (engine/kv_alloc.py:77);PyObject_Malloc (libpython3.11.so)",
    ],
    "model": [
        "Engine._step (engine/engine.py:110);LlamaModel.forward (engine/model.py:88);LlamaModel.attention (engine/model.py:141);sgemm_kernel (libopenblas.so)",
        "Engine._step (engine/engine.py:110);LlamaModel.forward (engine/model.py:88);LlamaModel.mlp (engine/model.py:170);at::native::silu_kernel (libtorch_cpu.so)",
        "Engine._step (engine/engine.py:110);LlamaModel.forward (engine/model.py:88);LlamaModel._build_inputs (engine/model.py:60)",
    ],
    "sampler": [
        "Engine._step (engine/engine.py:118);PythonSampler.sample (engine/sampler.py:64);PythonSampler.top_p (engine/sampler.py:112)"
    ],
    "detokenizer": [
        "Engine._step (engine/engine.py:125);IncrementalDetokenizer.decode (engine/tokenizer.py:90)"
    ],
    "queue": [
        "Engine._step (engine/engine.py:90);Engine._drain (engine/engine.py:72);take_gil (libpython3.11.so)"
    ],
}
# Closed-loop clients spend nearly all their time waiting for their reply, as py-spy sees them.
CLIENT_THREADS = 6
_CLIENT_STACK = (
    "Thread._bootstrap (threading.py:995);Thread.run (threading.py:982);_Load.serve (scenarios/loadgen.py:178);"
    "Ticket.wait (profiler/session/drive.py:26);Condition.wait (threading.py:320)"
)
_CLIENT_ENCODE = (
    "Thread._bootstrap (threading.py:995);Thread.run (threading.py:982);_Load.serve (scenarios/loadgen.py:170);"
    "Engine.submit (engine/engine.py:115);Tokenizer.encode (engine/tokenizer.py:40)"
)


def _collapsed_stacks(rng: np.random.Generator, steps: pd.DataFrame) -> str:
    # py-spy samples at 100 Hz: a phase's sample count follows its total time.
    lines = []
    for phase, stacks in _PHASE_STACKS.items():
        total = float(steps[f"{phase}_ms"].sum()) / 10.0
        weights = rng.dirichlet(np.ones(len(stacks)))
        for stack, weight in zip(stacks, weights):
            count = max(1, int(total * weight))
            lines.append(f"{ENGINE_THREAD};{_STACK_BASE};{stack} {count}")
    wall = float(steps["duration_ms"].sum()) / 10.0
    for client in range(CLIENT_THREADS):
        thread = f"thread ({5000 + client}): loadgen-client-{client}"
        lines.append(f"{thread};{_CLIENT_STACK} {max(1, int(wall * 0.97))}")
        lines.append(f"{thread};{_CLIENT_ENCODE} {max(1, int(wall * 0.03))}")
    lines.append(
        f"thread (4000): MainThread;<module> (cli/main.py:12);Thread.join (threading.py:1119) {int(wall)}"
    )
    return "\n".join(lines) + "\n"
