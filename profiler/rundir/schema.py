"""result.json's schema as types, one TypedDict per section: what the reader checks a file against and what docs/result-schema.md is generated from.

Every field may be null below the top level (a figure that was not measured), and every table keeps
keys this version does not know: branches of the tool add sections and fields (health, target
processes, ...) faster than one schema module can list them, so an unknown key is tolerated, never
refused. A field listed here must have the type written here, or the file is refused.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypedDict, Union

from ...errors import ResultError
from ...scenarios.recorded import ScenarioDict

# The version written now, and the oldest this infer-prof still reads (older files lack sections that are
# optional here, so they load; a file before the oldest is refused with one line).
SCHEMA_VERSION = 1
OLDEST_READABLE_VERSION = 1


class Latency(TypedDict, total=False):
    """A latency metric over the measured requests, in milliseconds (null when no request had it)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class MeanMax(TypedDict, total=False):
    mean: float | None
    max: float | None


class BatchSizes(MeanMax, total=False):
    """The batch over the engine's steps: mean and max a step, and the mean weighted by each step's time."""

    time_weighted_mean: float | None


class OpenMP(TypedDict, total=False):
    """How torch's OpenMP threads waited and how many ran at the start, and who chose (engine.threads)."""

    wait_policy: str
    set_by: str  # "infer-prof", "user", or the opt-out variable
    adaptive_threads: bool  # whether the engine could lower torch to one thread under contention
    why: str
    applied: bool  # false when torch was loaded before the choice could take effect
    threads: int
    threads_set_by: str


class BlockKernel(TypedDict, total=False):
    """What ran --dtype q4_1's C kernels (native_paths.block_linear): the vector loop, the threads, the decode steps."""

    vector_loop: str  # "AVX-512 VNNI", "AVX2" or "portable C"
    threads: str  # torch's OpenMP threads (with the libgomp's path), or one thread
    decode_steps: str  # how a step in which every sequence decodes runs its layers


class EngineSizes(TypedDict, total=False):
    """The engine's config as it ran (engine.config.EngineConfig, with the pool size it resolved to)."""

    block_size: int
    kv_blocks: int
    kv_memory_bytes: int | None
    max_batch: int
    max_batched_tokens: int
    policy: str
    seed: int
    max_model_len: int | None
    openmp: OpenMP | None
    block_kernel: BlockKernel | None  # only for --dtype q4_1


class Config(TypedDict, total=False):
    """What was run: the model, twins, scenario and profile."""

    model: str
    model_source: str
    dtype: str | None  # null for a `run --target` server that does not say
    device: str
    graphs: str
    native: list[str]  # the C twins that ran
    native_requested: list[str]  # the C twins --native asked for (a difference: a fallback)
    scenario: str
    seed: int
    requests: int | None
    duration_s: float | None
    profile: str  # default, deep, off or counters
    collectors: list[str]
    engine: EngineSizes
    injections: list[str]  # test instruments planted by selftest
    verify: bool
    target: str  # `run --target`: the server's URL
    prompt_tokenizer: str  # `run --target`: the model whose tokenizer sized the prompts


class Gpu(TypedDict, total=False):
    name: str
    driver: str
    memory_mib: float


class Environment(TypedDict, total=False):
    """The machine and software the run ran on."""

    python: str
    platform: str
    cpu_model: str
    cpu_count: int | None
    torch_version: str
    torch_threads: int
    cuda_available: bool
    gpu: Gpu | None
    git_revision: str | None
    infer_prof_version: str


class Metrics(TypedDict, total=False):
    """Serving metrics over the measured requests (client-side for `run --target`)."""

    completed: int
    failed: int
    request_throughput: float
    output_token_throughput: float
    total_token_throughput: float
    goodput: float | None
    slo: dict[str, float]  # the scenario's objectives that are set (goodput's definition)
    rejected: int  # measured requests the engine refused (in-process runs)
    loadgen_schedule_lag_ms: dict[str, float | None]  # mean, p99, max: how late the load generator sent
    ttft_ms: Latency
    tpot_ms: Latency
    itl_ms: Latency
    e2e_ms: Latency
    queue_ms: Latency
    duration_s: float


class HeapTrims(TypedDict, total=False):
    available: bool
    interval_s: float
    trims: int
    total_ms: float


class ThreadFigures(TypedDict, total=False):
    """What engine.thread_governor did: torch's thread count, its switches, the time spent at one thread."""

    threads: int
    threads_at_end: int
    switches: int
    one_thread_s: float
    watched_s: float  # the engine thread's life (warm-up and drain included), which one_thread_s is part of


class CudaGraphs(TypedDict, total=False):
    """What the decode graphs did in a run (engine.cuda_graphs.GraphStats): steps replayed and run eagerly, captures."""

    replayed_steps: int
    eager_steps: int
    captures: int
    capture_ms: float
    buckets: list[list[int]]


class EngineFigures(TypedDict, total=False):
    """What the engine did: steps, preemptions, the KV pool's use (from steps.csv)."""

    steps: int
    preemptions: int
    blocks_total: int
    blocks_free: int
    blocks_free_at_end: int
    requests_finished: int  # over the engine's life, warm-up included (Engine.stats), as the three below
    tokens_generated: int
    waiting: int
    running: int
    busy_s: float  # the steps' own time
    span_s: float  # first step's start to last step's end
    busy_fraction: float | None
    batch_size: BatchSizes
    kv_utilization: MeanMax
    fragmentation_slots: MeanMax
    graphs: CudaGraphs  # --graphs: what the decode graphs did (engine.cuda_graphs)
    threads: ThreadFigures  # absent when the user chose the threading (engine.threads)
    heap_trims: HeapTrims


class Split(TypedDict, total=False):
    """One method's time split: shares of the engine thread's wall time by category and component."""

    categories: dict[str, float | None]  # profiler.rundir.results.CATEGORIES
    components: dict[str, float | None]  # profiler.rundir.results.COMPONENTS
    dispatch: float | None
    samples: int
    resolution: str  # "python" or "native"
    python_leaf: float | None  # the share of samples whose leaf frame is Python code
    lock_by_component: dict[str, float | None]
    gil_by_component: dict[str, float | None] | None  # null without native stacks
    allocation_by_component: dict[str, float | None]
    kernel_fraction_by_span: dict[str, float | None]
    fee_fraction_by_span: dict[str, float | None]
    kernel_source: str | None  # where the kernel share came from: "windows", "native", "assumed"
    steps: int
    spans: int  # spans only: how many spans were timed (the evidence)
    locks_seen: str  # spans only: "traced", the locks `lock` can hold (taken through tracer.lock())
    traced_locks: list[str]  # spans only: their names


class StepShare(TypedDict, total=False):
    """A control path's share of step time over the run's steps, with a moving-block bootstrap 95% interval."""

    share: float
    low: float
    high: float
    steps: int


class Breakdown(TypedDict, total=False):
    """Where the engine thread's time went, by spans and by py-spy samples, and how far they disagree."""

    wall_s: float
    methods: dict[str, Split | None]  # "spans", "samples"
    disagreement: dict[str, float | None]  # category -> percentage points
    component_disagreement: dict[str, float | None]
    client_threads: Split | None
    notes: list[str]
    beyond_noise: list[str] | None  # categories whose gap between the methods is beyond noise
    components_beyond_noise: list[str] | None
    share_intervals: dict[
        str, StepShare
    ]  # control path -> its share of step time (profiler.analysis.step_shares)
    processes: list[
        ForeignProcess
    ]  # another engine's processes as analysis.roles reads them, counts included


class Prediction(TypedDict, total=False):
    """One control path's Amdahl prediction: its share, the C twin's speedup, the gain that follows."""

    share: float
    native_speedup: float | None
    native_speedup_low: float | None
    native_speedup_high: float | None
    speedup_source: str | None  # "replay" or "microbenchmark"
    predicted_gain: float | None
    predicted_gain_low: float | None
    predicted_gain_high: float | None
    measured_gain: float | None
    share_low: float  # the share's 95% bounds (its step-time interval), which the gain's interval carries
    share_high: float
    twin_on: bool  # the C twin was on in this run: nothing to predict
    added_cost: float  # work the C twin adds that the Python twin does not (the logits' copy to the host)
    void: str | None  # why the prediction cannot be trusted (a busy machine), None when it can
    within_noise: (
        bool | None
    )  # --verify: the measured gain is inside the Python runs' spread (null: not measured)


class Interval(TypedDict, total=False):
    """The interpreter share of busy time with its interval: native samples' Wilson interval, the spans' (steps and
    kernel windows: profiler.analysis.share_interval), or both intersected; `method` says which."""

    share: float | None
    low: float | None
    high: float | None
    samples: int  # the evidence counted: busy engine samples, or steps for the spans' interval
    method: str
    confidence: float  # 0.95, or higher at a later look of a run that stopped when resolved (profiler.stats)
    windows: int  # torch.profiler windows whose kernel fractions entered the interval
    widest: (
        str  # the input that holds the interval open: "steps", "kernel windows", "kernel windows (too few)"
    )


class VerifyComponent(TypedDict, total=False):
    """One twin's --verify entry (profiler.checks.verify): its prediction beside the gain measured by a native run
    between Python runs, or (method "in-run") by one run whose twins took turns, with that gain's interval."""

    method: str  # "in-run"; absent: a native run against its Python neighbours
    share: float
    native_speedup: float | None
    speedup_source: str
    span_speedup: float | None
    python_busy_us_per_token: float | None
    native_busy_us_per_token: float | None
    python_component_us_per_token: float | None
    native_component_us_per_token: float | None
    predicted_gain: float | None
    measured_gain: float | None
    measured_low: float | None
    measured_high: float | None
    agreement: float | None  # measured / predicted
    predicted_within: bool | None
    half_width: float | None
    band: float | None
    resolves: bool | None
    predicted_half_width: float | None
    prediction_resolves: bool | None
    busy_gain: float | None
    busy_low: float | None
    busy_high: float | None
    mix_matched_gain: float | None
    mix_coverage: float | None
    mix_agreement: float | None
    parts: dict[str, float]
    own_gain: float | None
    own_low: float | None
    own_high: float | None
    own_agreement: float | None
    own_within: bool | None
    pairs: int
    units: int
    unit_blocks: int | None
    block_steps: int | None
    steps: int
    switches: int
    switch_ms: dict[str, float]
    batch_size_mean: dict[str, float | None]
    run_dir: str
    run_dirs: list[str]
    python_neighbours: list[str]
    turns: str
    turns_files: list[str]
    void: str | None


class Verify(TypedDict, total=False):
    """--verify: each twin's measured gain next to its prediction (profiler.checks.verify)."""

    method: str
    python_runs: int
    python_spread: float | None
    components: dict[str, VerifyComponent]
    skipped: dict[str, str]
    ledger: str  # where its pairs went (profiler.ledger): "N pair(s) appended to PATH", or why not


class GpuVerdict(TypedDict, total=False):
    """The verdict on a GPU: the share of the run the GPU waited for the host, the rule on it, and on what."""

    idle_host_share: float | None
    rule: str | None
    waited_on: list[list[str | float]]  # [component, its part of the host wait], largest first
    sentence: str


class ControlPath(TypedDict, total=False):
    name: str
    share: float


class SampleCounts(TypedDict):
    """Sample counts pooled over threads: the input of analysis.breakdown.samples_split (analysis.sample_counts pools
    them). Counts are floats since a pool that takes turns running one loop keeps a fraction of its idle samples
    (analysis.foreign_figures.loop_counts)."""

    samples: float
    work: (
        float  # samples that are not waits (analysis.roles.ThreadSplit.work); 0 where the threads did not say
    )
    gil: float  # GIL waits, counted as work
    native_samples: float
    dispatch: float
    categories: dict[str, float]
    components: dict[str, float]
    waits: dict[str, float]  # wait kind -> samples (idle, queueing, worker, client, lock)
    by_category: dict[str, float]  # "category/component" -> samples
    lock_components: dict[str, float]
    gil_components: dict[str, float]


class ThreadSampleCounts(SampleCounts, total=False):
    """One sampled thread's counts (analysis.roles.ThreadSplit.counts): its id beside them."""

    thread_ids: list[int]


class SampledThread(TypedDict, total=False):
    """One sampled thread of a server: its role (and why) and the shares of its own samples (analysis.roles)."""

    thread_id: int | None
    name: str | None
    role: str
    role_words: str
    reason: str
    samples: int
    work_share: float
    categories: dict[str, float]
    components: dict[str, float]
    waits: dict[str, float]
    gil_wait: float | None  # native stacks only
    event_loop: bool
    counts: (
        ThreadSampleCounts  # breakdown.processes only: what its shares count (verdict rows leave them out)
    )


class ForeignProcess(TypedDict, total=False):
    """One sampled process of another engine: its role, engine, engine thread and threads."""

    pid: int | None
    role: str
    role_words: str | None
    engine: str | None
    engine_thread: int | None
    resolution: str | None
    threads: list[SampledThread]
    engine_threads: list[
        int
    ]  # breakdown.processes only: every engine-loop thread, pooled for the engine split
    notes: list[str]  # breakdown.processes only: how the engine thread was chosen where no table named it


class ProcessSplit(TypedDict):
    """A process's `split` in a server run's process table (session.target.processes): its engine thread, the shares
    of its samples, its threads."""

    engine_thread: str | None
    resolution: str | None  # "native" or "python"
    categories: dict[str, float | None]  # those with samples
    components: dict[str, float | None]
    python_leaf: float | None
    threads: dict[str, SampledThread]


class TargetProcess(TypedDict, total=False):
    """One row of a server run's process table (session.target.processes): what /proc said of the process, whether
    and how it was sampled, its split; with --ray-address, where Ray placed it (session.target.ray_table)."""

    pid: int
    ppid: int | None  # None for a Ray-placed process: a raylet's child on its node, not the server's
    title: str
    cmdline: str
    python: bool
    listening: bool
    role: str
    role_source: str
    late: bool  # appeared after the watch started
    first_seen_s: float
    exited: bool
    primary: bool  # the process the run's verdict reads
    sampled: bool
    not_sampled: str | None  # why not
    mode: str | None  # "native" or "nonblocking" (Python frames only)
    samples: int
    busy_samples: int
    samples_file: str | None
    split: ProcessSplit | None
    partial: bool  # Ray-placed: sampled over less of the load (its node was lost)
    placed_by: str  # with --ray-address: "ray" or "process tree"
    node_id: str
    node_ip: str
    key: str  # node:pid
    actor_class: str
    actor_id: str
    job_id: str
    rank: int | None


class WorkerSplit(TypedDict, total=False):
    """The model worker's own split of its busy samples (kernel and interpreter need native stacks)."""

    pid: int | None
    busy_samples: float
    kernel: float | None
    interpreter: float | None
    components: dict[str, float]


class CriticalPath(TypedDict, total=False):
    """A step of a loop that waits on its model worker: the loop's own work, the wait, the worker's split."""

    loop_work: float
    waiting_on_worker: float
    worker: WorkerSplit | None


class ApiThread(TypedDict, total=False):
    """The API server's event loop: its busy share and GIL waits."""

    pid: int | None
    thread_id: int | None
    work_share: float
    gil_wait: float | None
    components: dict[str, float] | None
    sentence: str


class AmdahlBound(TypedDict, total=False):
    """A component's share of the loop's busy time: its Amdahl bound at an infinite speedup, with its interval."""

    bound: float
    low: float
    high: float
    samples: float
    where: str
    method: str  # "bound only (Amdahl)", or "slowdown-measured (sensitivity s [lo, hi]) ..." after a --what-if run


class ForeignVerdict(TypedDict, total=False):
    """Another engine's verdict (profiler.analysis.foreign): its loop, waits, critical path and Amdahl bounds."""

    engine: str | None
    engine_pid: int | None
    engine_threads: list[int]
    loop: dict[
        str, float | None
    ]  # samples, busy, and shares of busy time: interpreter, kernel, waiting_on_worker...
    critical_path: CriticalPath | None
    waits: dict[str, float]  # wait kind -> share of every sampled thread's samples
    api: ApiThread | None
    amdahl: dict[str, AmdahlBound]
    amdahl_note: str
    processes: list[ForeignProcess]
    queueing: str  # requests queued behind one another (analysis.foreign.queueing_reason)


class Stopping(TypedDict, total=False):
    """`run --until resolved`: how the run that went on until its answer was known ended (profiler.session.until)."""

    rule: str  # "until resolved"
    stopped_by: str | None  # "resolved", "time cap"; null when no round ended (a stopped run)
    looks: int  # looks taken, one after each whole round; the intervals' confidence is spent over them
    rounds: int  # whole rounds of the scenario's load driven
    elapsed_s: float  # load time at the last look
    max_time_s: float
    confidence: (
        float  # the final intervals' level: 1 - 0.05 / (looks (looks + 1)), which keeps 95% at any stop
    )
    held_by: list[str]  # at the last look, what was not resolved (empty when resolved)
    widths: str  # the widths a look asks of the share and of each prediction
    look_s: float  # the looks' own time, all together (the engine idles between rounds meanwhile)


class Verdict(TypedDict, total=False):
    """The bottleneck in one sentence's worth of fields, and what moving each control path to C would gain."""

    category: str | None
    component: str | None
    share: float | None
    interpreter_share: float | None
    interpreter_interval: Interval | None
    straddles: list[float] | None  # the thresholds (0.01, 0.3) the interval straddles
    rule: str | None
    reasons: list[str]
    blind_spots: list[str]
    predictions: dict[str, Prediction]
    source: str | None  # "spans" or "samples"; null when neither is available
    verify: Verify
    gpu: GpuVerdict
    largest_control_path: ControlPath | None  # among the paths still in Python
    twins_on: list[str]  # the control paths whose C twin ran: nothing is predicted for them
    foreign: ForeignVerdict  # another engine's verdict: engine loop, waits, critical path, bounds
    stopping: Stopping  # `run --until resolved`: rounds, looks, and what held the answer up


class ReplayComponent(TypedDict, total=False):
    speedup: float | None
    low: float | None
    high: float | None
    steps: int
    python_us_per_step: float | None
    native_us_per_step: float | None
    twins_agree: bool
    rows: int
    torch_threads: dict[str, int]  # sampler: {torch thread count: replayed calls}, each at its call's count
    torch_threads_own: int  # sampler: torch's count on the replay's thread, where the run did not lower it
    python_priced: str  # sampler: "run" (the Python twin's time a row as the run timed it) or "replay"
    native_clock: str  # sampler, priced by the run: "thread cpu" (C twin's CPU time, run's clock) or "wall"
    core_share: float | None  # ... the engine thread's share of a core in the run, that CPU time over it
    run_calls: int  # sampler, priced by the run: its calls that priced it (recorded, not the first)
    replayed_python_us_per_step: float  # sampler, priced by the run: the replay's own Python time a step
    replayed_python_over_run: float | None  # ... over the run's at the same calls (the replay's conditions)


class Replay(TypedDict, total=False):
    """The C twins timed on this run's recorded work (profiler.replay.replay)."""

    steps_recorded: int
    steps_in_run: int
    repeats: int
    components: dict[str, ReplayComponent]
    skipped: dict[str, str]


class Overhead(TypedDict, total=False):
    """What profiling cost: the throughput ratio and each collector's share."""

    throughput_ratio: float | None
    method: str
    collectors: dict[str, float | None]


class NvmlStats(TypedDict, total=False):
    mean: float | None
    p50: float | None
    max: float | None


class NvmlProcess(TypedDict, total=False):
    """This process on the GPU, as NVML reports it (null where the driver does not)."""

    pid: int | None
    samples: int
    memory_used_mib: NvmlStats | None
    sm_utilization_pct: NvmlStats | None


class Nvml(TypedDict, total=False):
    """profiler.collectors.gpu's figures, polled once a second: this process's beside the whole device's
    (every process on it); only status and reason when it did not run."""

    status: str
    reason: str | None
    device: str
    driver: str
    memory_total_mib: float
    samples: int
    interval_s: float
    process: NvmlProcess
    utilization_pct: NvmlStats | None
    memory_utilization_pct: NvmlStats | None
    memory_used_mib: NvmlStats | None


class TopKernel(TypedDict):
    """One GPU kernel of the torch.profiler windows: its name, its device time and how often it ran."""

    name: str
    device_ns: float
    count: int


class GpuTime(TypedDict, total=False):
    """A GPU run's device-busy time and its idle time split by cause (profiler.session.gpu_time)."""

    window_ns: float
    device_busy_ns: float
    idle_host_ns: float
    idle_no_work_ns: float
    busy_share: float | None
    idle_host_share: float | None
    idle_no_work_share: float | None
    idle_host_by_component: dict[str, float]
    device: str  # profiler.collectors.device_time's figures: the device, its event pairs and steps
    pairs: int
    unread_pairs: int
    steps: int
    spans: list[str]
    method: str
    busy_ns_per_step: float | None
    window_gpu_idle_fraction: float | None  # from the torch.profiler windows
    kernels_per_step: float | None
    launches_per_step: float | None
    mean_kernel_ns: float | None
    top_kernels: list[TopKernel]  # the ten with the most device time (collectors.kernels)
    nvml: Nvml


class TargetServer(TypedDict, total=False):
    name: str | None
    version: str | None
    model: str
    source: str  # where name and version came from


class TargetTree(TypedDict, total=False):
    """The server's process tree: its root, how it was found, a note when a check could not be made."""

    root: int | None
    source: str | None
    note: str | None
    listeners: list[int]


class ServerDeath(TypedDict, total=False):
    """The server died during the load (session.target.liveness): the process seen gone first, when, and how."""

    pid: int
    title: str
    cmdline: str
    at_s: float  # seconds into the load when it was seen gone (to the watch's 0.2 s)
    exit_status: int | None  # as the OS tells it: negative = killed by that signal (Popen); None = unknown
    status_of: str  # whose status that is: "its own", "the launched command's" or "unknown"
    signal: str | None  # SIGSEGV, SIGKILL, ... when the status says a signal ended it
    processes_gone: list[int]
    log_tail: list[str] | None  # the launched server's last log lines (--launch); None for --target
    headline: str  # the run's first line


class RayNodeEntry(TypedDict, total=False):
    """One node of a --ray-address run (session.target.ray_agents): its sampling agent's outcome and its clock."""

    node_id: str
    node_ip: str
    hostname: str | None  # as the agent saw it; None when no agent ran there
    pids: list[int]  # the server's processes on it
    agent: (
        str  # "done", "died", "not placed", "no free CPU", "no py-spy" (or "sampling", "pending": cut short)
    )
    reason: str | None  # why it was not sampled, or when it was lost
    clock_offset_ms: float | None  # the node's clock minus the driver's, from the shortest round trip
    clock_uncertainty_ms: float | None  # half that round trip: the offset is inside +- this
    clock_consistent: bool | None  # every round's bound overlaps (False: a clock moved during the rounds)
    chunks: int  # chunks of py-spy samples received from it
    died_after_s: float | None  # seconds after the agents started when the node was seen gone
    # With --probe (session.target.ray_probe): the processes whose probe files it sent, why none (or what was cut),
    # and its perf_counter_ns against the driver's: the bound on an aligned record, and how far it moved in the run.
    probe_processes: int
    probe_reason: str | None
    probe_clock_uncertainty_ms: float | None
    probe_clock_drift_ms: float | None


class TargetRay(TypedDict, total=False):
    """`--ray-address`: the server's processes Ray placed, found through Ray's state and sampled on their nodes."""

    address: str
    address_source: str  # "--ray-address" or "RAY_ADDRESS"
    state_source: str  # which Ray interface listed the actors (the state API, or the control store's tables)
    jobs: list[str]  # the Ray jobs whose driver is a process of the server's tree
    driver_node: str  # the node infer-prof joined from (the tree's processes are read there)
    processes: int  # Ray-placed processes of the server
    nodes: list[RayNodeEntry]
    same_host: bool  # every node ran on one host (one clock: the offsets measure the method's error)
    notes: list[str]
    lines: list[str]  # what the terminal says of it


class TargetReplica(TypedDict, total=False):
    """One replica behind the router (session.target.replicas): where it listens, how it was found, its engine loop."""

    url: str
    name: str  # HOST:PORT
    found_by: str  # "--replica" or "the router's connections"
    found_s: float | None  # seconds after sampling started when it was found (0: named with --replica)
    root: int | None  # the root of its process tree on this machine
    pids: list[int]
    sampled_with_router: bool  # its processes are in the router's own tree, sampled there
    cpu_s: float | None  # CPU seconds its processes used over the load (/proc: exact): what balance compares
    engine_pid: int | None  # the process whose engine loop was read (foreign_figures.engine_process)
    engine_role: str | None
    samples: int  # the loop's samples
    busy_samples: int  # those not waiting for work
    busy: Interval | None  # the loop's busy share with its Wilson interval (its window: from found_s)
    interpreter: Interval | None  # the interpreter share of its busy time, as the verdict reads a loop
    split: dict[str, float]  # interpreter, kernel, on_worker, lock: shares of the loop's busy samples
    rule: str | None  # the 1% / 30% rule on its interpreter share
    reason: str | None  # why it has no split


class TargetReplicas(TypedDict, total=False):
    """The replicas behind a --target router (session.target.replicas), and whether they did equal work."""

    source: str  # "--replica" or "the router's connections"
    router: str
    router_pids: list[int]
    requests: int  # measured requests of the load (the fair router's spread is over them)
    replicas: list[TargetReplica]
    balanced: bool | None  # CPU shares within a fair router's spread; None: fewer than two replicas' CPU read
    spread: float | None  # that spread: the 95% half-width of one replica's share under random routing
    busiest: str | None  # when not balanced: the busier replica's name, and the idler one's
    idlest: str | None
    lines: list[str]  # what the terminal says of them


class TargetSplit(TypedDict, total=False):
    """Whether the server's time could be split, by which methods, and why not."""

    available: bool
    methods: list[str]
    reason: str | None
    engine_thread: str | None


class GilSamples(TypedDict, total=False):
    engine_thread: float | None
    api_thread: float | None
    by_thread: dict[str, float]


class Gil(TypedDict, total=False):
    """GIL contention between the API layer and the engine thread (session.target.server_split.gil_section)."""

    samples: GilSamples  # native stacks: the share of each thread's samples waiting for the GIL
    spans_off_cpu: dict[str, dict[str, float] | None]  # thread -> span_share, off_cpu_share, ...


class TargetClient(TypedDict, total=False):
    """The load generator itself: its CPU, its lateness against the schedule, whether it limited the load."""

    cpu_s: float
    loop_cpu_s: float
    wall_s: float
    cpu_fraction_of_one_core: float
    python_threads: int
    peak_in_flight: int
    schedule_lag_ms: Latency  # how late the requests were sent against the schedule
    bottleneck: bool
    note: str


class ProbeCalls(TypedDict, total=False):
    calls: int
    ms: float
    share_of_wall: float


class ProbeProcess(TypedDict, total=False):
    """One process of the server as the probe saw it: what it patched, missed, dropped, and its components."""

    pid: int
    node_id: str  # a process of another Ray node (--ray-address with --probe): its records sent by that node's agent
    key: str  # node:pid, where node_id is given
    role: str | None
    loaded: bool
    records: int
    patched: list[str]
    missing: list[str]
    dropped: int
    cost_ns: float | None
    components: dict[str, ProbeCalls]


class ProbeShare(TypedDict, total=False):
    """A component's time per step and its share of step time, with a bootstrap 95% interval."""

    ms_per_step: float
    share: float
    low: float | None
    high: float | None
    where: str  # "engine loop" or "other process"


class ProbeSteps(TypedDict, total=False):
    """The engine's steps as the probe timed them, and each component's share of them."""

    pid: int
    count: int
    with_probes_on: int
    mean_ms: float | None
    p50_ms: float | None
    components: dict[str, ProbeShare]
    loop_work: (
        ProbeShare  # the loop's own work per step (its step's exclusive time and calls that are not waits)
    )
    note: str


class PairedDifference(TypedDict, total=False):
    """The typical relative step-time difference of paired steps, with a bootstrap 95% interval."""

    point: float
    low: float | None
    high: float | None
    pairs: int
    units: int
    statistic: str


class ProbeCost(TypedDict, total=False):
    """The probe's own cost: in-run A/B on step time, an A/A beside it, and priced from calls x cost."""

    priced: float | None
    priced_by_pid: dict[str, float]
    ab: PairedDifference | None
    aa: PairedDifference | None
    note: str
    pairs: dict[str, int]  # on_off, like
    matched_by: str  # "step sizes within 10%" where only neighbours of about equal size were paired


class ProbeAgreement(TypedDict, total=False):
    """One component on one thread: the probe's share of the thread's wall time against the samples' interval."""

    pid: int
    thread: str | None
    thread_id: int
    component: str
    probe_share: float
    sample_share: float
    samples: int
    low: float
    high: float
    agree: bool


class SlowdownLevel(TypedDict, total=False):
    """One delay level of a slowdown: its sensitivity, and the curve's point (ms added, ms of response, per unit)."""

    level: float
    sensitivity: float | None
    low: float | None
    high: float | None
    pairs: int
    added_ms_per_unit: float
    response_ms_per_unit: float
    within_noise: (
        bool  # its interval reaches a response under 5% of the delay: the level did not measurably slow it
    )


class SlowdownNull(TypedDict, total=False):
    """The A/A: neighbouring turns without a delay; their response difference per unit, with its interval."""

    difference_ms: float
    low: float | None
    high: float | None
    pairs: int


class SlowdownSensitivity(TypedDict, total=False):
    """A component's sensitivity to its own slowdown, pooled and per level (analysis.probe_slowdown.sensitivity_figures):
    the figures a probe's slowdown and the built-in engine's share."""

    sensitivity: (
        float | None
    )  # added response time per added ms of the component's own (1: serial, ~0: overlapped)
    low: float | None
    high: float | None
    pairs: int
    linear: bool | None  # False when the levels disagree (a curve: see levels)
    levels: list[SlowdownLevel]
    null: SlowdownNull | None


class SlowdownGain(TypedDict, total=False):
    """The predicted gain of a k-times faster component: sensitivity x its share x (1 - 1/k), as a fraction."""

    speedup: float
    gain: float
    low: float | None
    high: float | None


class Headroom(TypedDict, total=False):
    """How much slower a component beside the loop can get before it limits throughput (x its own time)."""

    utilisation: float  # the busy share of the thread it runs on, in turns without a delay
    extrapolated_x: float | None  # the factor at which that thread would be busy all the time
    measured_x: float | None  # 1 + the largest level whose response stayed within noise: at least this
    method: str


class DelayAccuracy(TypedDict, total=False):
    """The delays the probe added against those it was asked for, per call."""

    calls: int
    requested_ms: float
    added_ms: float
    ratio: float | None  # added / requested, summed over the calls
    median_error: float | None  # median over calls of |added / requested - 1|
    within_5pct: float | None  # share of calls whose added time is within 5% of the requested


class ProbeLevelScale(TypedDict, total=False):
    """A component's levels scaled to its share in a probe slowdown run (the sitecustomize's, from the first steps)."""

    scale: float  # the factor its levels were multiplied by: at least 1, no level past checks.slowdown.MAX_LEVEL (100x)
    share: (
        float | None
    )  # its outermost calls' time over the steps' in the measuring steps (None: none measured)
    capped: bool  # the top level hit the ceiling before it added its target share of the step
    steps: int | None  # the steps measured
    skipped: int | None  # the steps before them, left out (a server's start-up)
    pid: int  # the process whose scale this is (the one that tallied the most calls)
    range: list[float]  # min, max over the processes that run it, where more than one does
    why: str | None  # why the levels stayed unscaled


class ProbeSlowdown(SlowdownSensitivity, total=False):
    """One component's slowdown experiment (profiler.analysis.probe_slowdown)."""

    component: str
    path: str  # "step" (on the step's path: response = step time) or "beside" (response = time per unit)
    units: str  # "steps" or "tokens"
    share: float | None  # its time over the response's, in turns without a delay
    ms_per_unit: float | None
    gain: SlowdownGain | None
    headroom: Headroom | None
    accuracy: DelayAccuracy | None
    scale: ProbeLevelScale | None  # how its levels were scaled to its share (None: fixed levels)
    note: str


class ProbeWhatIf(TypedDict, total=False):
    """`--what-if`: the slowdown experiments the probe ran, and what each component's response says."""

    levels: list[float]  # as asked, before each component's scale
    turn_steps: int
    turns: int
    measure_steps: int  # the undelayed steps at the start that measured each component's share for its scale
    scales: dict[str, float]  # per component, the factor its levels were multiplied by (as EngineWhatIf's)
    components: dict[str, ProbeSlowdown]
    lines: list[str]


class MeasuredBeside(TypedDict, total=False):
    """The gain --verify measured with the C twin on, beside a slowdown-predicted one."""

    gain: float
    low: float | None
    high: float | None
    agreement: float | None  # measured / predicted
    within_band: bool | None  # the agreement within 1 +- 0.2
    void: str | None  # why --verify's run cannot stand for the engine (its drift guard or health)


class EngineSlowdown(SlowdownSensitivity, total=False):
    """One component's slowdown on the built-in engine (profiler.checks.what_if); share and speedup are the main run's."""

    share: float | None  # the main run's share of busy time
    share_off: float | None  # its share of step time in the slowdown run's turns without a delay
    speedup: float | None  # the C twin's replayed speedup (the main run's prediction's)
    speedup_source: str | None
    amdahl_gain: float | None  # the main run's Amdahl prediction at that speedup
    gain: SlowdownGain | None  # sensitivity x share x (1 - 1/speedup)
    gain_if_free: SlowdownGain | None  # sensitivity x share: the component's cost taken away
    accuracy: DelayAccuracy
    measured: MeasuredBeside | None
    void: str | None  # why there is no sensitivity, or why the slowdown run cannot stand


class WhatIfRound(TypedDict):
    """One run of the slowdown (a round): its directory under the main run, its labelled steps and its health."""

    run_dir: str  # what-if for the first, what-if-2, what-if-3 for the next
    steps: int
    void: str | None  # why the round's run cannot be trusted (its health), or None


class EngineWhatIf(TypedDict, total=False):
    """`run --what-if` on the built-in engine: the slowdown runs (what-if/, then what-if-N/ for further rounds) and
    each component's sensitivity over their pooled pairs."""

    method: str
    run_dir: str  # the first round's
    rounds: list[WhatIfRound]  # every round that ran, in order
    max_rounds: int  # --what-if-rounds: the rounds stop earlier once every sensitivity is precise
    levels: list[float]
    scales: dict[str, float]  # per component, the factor its levels were multiplied by (slowdown.level_scale)
    released: dict[
        str, float
    ]  # per component, the share of its delay spent with the GIL released (its kernel share)
    gil_release: (
        str  # "released" (the C busy wait), or "held (...)": the twin, when the extension is not built
    )
    block_steps: int
    steps: int  # labelled steps over all rounds
    void: str | None
    components: dict[str, EngineSlowdown]
    ledger: str  # where the slowdown/--verify pairs went


class Probe(TypedDict, total=False):
    """`--launch --probe`: spans timed inside the server (profiler.analysis.probe_spans)."""

    window_s: float
    probes_on_s: float
    switches: int
    processes: list[ProbeProcess]
    loaded_in: list[int]
    steps: ProbeSteps | None
    cost: ProbeCost
    agreement: list[ProbeAgreement]
    lines: list[str]
    what_if: ProbeWhatIf


class SamplingCalibration(TypedDict, total=False):
    """py-spy run briefly on the quiet server before the load (session.target.sample_rate): a sample's CPU cost."""

    pid: int
    mode: str  # "native" or "nonblocking", as the run samples
    asked_hz: int
    wall_s: float
    samples: int  # of the process (py-spy reads a stack of each thread a sample)
    errors: int
    cpu_s: float  # py-spy's CPU from its attach to the end (its start-up excluded)
    cost_ms: float  # CPU a sample
    delivered_hz: float  # below asked_hz where py-spy fell behind
    threads: float | None  # stacks a sample: py-spy's own count over the samples


class SamplingInRun(TypedDict, total=False):
    """What the tree's py-spy samplers cost over the load (their start-up included)."""

    processes: int
    samples: int  # of the processes: the most any one thread of each had
    cpu_s: float
    cost_ms: float | None  # CPU a sample
    cores: float | None  # their CPU over the load's wall time, all processes together


class TargetSamplingRate(TypedDict, total=False):
    """py-spy's rate for another engine's tree: the busy samples the verdict's interval needs, capped by py-spy's
    CPU budget at the measured cost of a sample (session.target.sample_rate); fixed for --profile deep and our server."""

    rate_hz: int
    bound: str  # what set it: needed, budget, delivered, floor or fixed
    reason: str
    needed_samples: int | None  # busy samples that resolve prior_share against threshold (Wilson 95%)
    prior_share: float | None  # the tightest share worth resolving, assumed before the load
    threshold: float | None
    aim_s: float | None  # load in which the samples should come
    loop_busy_assumed: float | None
    needed_hz: float | None
    resolve_s: float | None  # load that many samples take at rate_hz, the loop busy as assumed
    budget_hz: float | None
    budget_cores: float | None  # py-spy's CPU allowed per sampled process
    processes: int | None  # Python processes of the tree at the calibration
    calibration: SamplingCalibration | None
    in_run: SamplingInRun | None


class HttpOutcome(TypedDict):
    """How the measured requests fared (session.target.client.http_outcome)."""

    sent: int
    failed: int
    failed_share: float
    errors: dict[str, int]  # by kind ("HTTP 500", the error's first word): how many
    error_examples: dict[str, str]  # by kind: one message
    headline: str | None
    latency_warning: str | None
    dropped_fields: dict[str, str]  # request field -> the server's words refusing it
    notes: list[str]


class TargetHttp(HttpOutcome, total=False):
    """How the measured requests fared (session.target.client.http_outcome), with the measured load's length."""

    measured_s: float


class Target(TypedDict, total=False):
    """`run --target URL`: the server profiled over HTTP (null for an in-process run)."""

    url: str
    server: TargetServer
    ours: bool
    pid: int | None
    pid_source: str | None
    split: TargetSplit
    threads: dict[str, SampledThread]  # "name (thread id)" -> the thread
    gil: Gil | None
    client: TargetClient
    http: TargetHttp
    failed_share: float | None  # of the measured requests, those that failed
    headline: str | None  # the line a run whose requests mostly failed leads with
    tree: TargetTree | None  # the server's process tree: its root, how it was found
    processes: list[TargetProcess] | None  # one entry per process: role, samples, split
    probe: Probe | None  # `--launch --probe`: spans timed inside the server (analysis.probe_spans)
    death: ServerDeath | None  # the server died during the load: the run's headline, and exit 1
    ray: TargetRay | None  # --ray-address: Ray-placed processes by (node, pid), per-node agents and clocks
    replicas: TargetReplicas | None  # a router's replicas here: each one's loop split, their balance
    sampling_rate: TargetSamplingRate | None  # py-spy's rate for the tree: what set it, its measured cost


class HealthLoad(TypedDict, total=False):
    """Offered against delivered load, the queue's share of latency, and how latency grew over the run."""

    mode: str | None
    offered_rps: float | None
    delivered_rps: float | None
    delivered_ratio: float | None
    queue_share: float | None
    latency_growth: float | None


class Health(TypedDict, total=False):
    """The run's own conditions (profiler.analysis.health): the CPU the engine thread got, others' load,
    offered against delivered load, and whether that voids the run's timings."""

    engine_thread: dict[str, float | None]  # cpu_s, wait_s, core_share
    machine: dict[str, float | int | None]  # cpus, others_cores, others_runnable_mean, steal_fraction
    load: HealthLoad
    contended: bool
    saturated: bool
    at_capacity: bool
    void: str | None
    lines: list[str]
    thresholds: dict[str, float]


class CollectorStatus(TypedDict, total=False):
    status: Literal["ok", "skipped", "failed"]
    reason: str | None


class ResultFile(TypedDict, total=False):
    """result.json: its sections, in the order a file lists them (each described below)."""

    schema_version: int
    config: Config
    environment: Environment
    scenario: ScenarioDict  # scenarios.spec.ScenarioSpec.to_dict()
    metrics: Metrics
    engine: EngineFigures
    counters: dict[str, float | None]  # a counting run's noise-free counts (profiler/collectors/counters.py)
    breakdown: Breakdown | None
    verdict: Verdict | None
    target: Target | None
    health: Health | None
    overhead: Overhead | None
    gpu_time: GpuTime | None
    replay: Replay | None
    what_if: EngineWhatIf | None
    collectors: dict[str, CollectorStatus]
    files: dict[str, str]  # name -> path relative to the run directory
    partial: bool
    partial_reason: str | None
    created_at: str


REQUIRED_SECTIONS = ("config", "environment", "scenario", "metrics")


def latency(metrics: Metrics, name: str) -> Latency:
    """The latency metric `name` (one of results.LATENCY_METRICS), {} when the run has none."""
    found = metrics.get(name)
    return typing.cast(Latency, found if isinstance(found, dict) else {})


def hints(section: type) -> dict[str, Any]:
    """A TypedDict's fields and their types, evaluated."""
    return typing.get_type_hints(section, globalns=vars(sys.modules[__name__]))


def check_file(data: object, source: str) -> None:
    """ResultError, one line naming `source` and the field, unless `data` is a result.json this version reads."""
    if not isinstance(data, dict):
        raise ResultError(f"{source}: expected a JSON object, found {_kind(data)}; re-record the run")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < OLDEST_READABLE_VERSION:
        raise ResultError(
            f"{source}: schema_version {version!r} is older than this infer-prof reads (it reads "
            f"{OLDEST_READABLE_VERSION} to {SCHEMA_VERSION}); re-record the run with this version"
        )
    if version > SCHEMA_VERSION:
        raise ResultError(
            f"{source}: schema_version {version!r} is not supported (this infer-prof reads {SCHEMA_VERSION}); "
            "re-record the run with this version, or read it with the newer infer-prof that wrote it"
        )
    missing = [name for name in REQUIRED_SECTIONS if name not in data]
    if missing:
        raise ResultError(f"{source}: missing section(s) {', '.join(missing)}")
    for name in REQUIRED_SECTIONS:
        if not isinstance(data[name], dict):
            raise ResultError(
                f"{source}: section {name!r} is {_kind(data[name])}, expected a table; re-record the run"
            )
    for name, hint in hints(ResultFile).items():
        if data.get(name) is not None:
            _check(data[name], hint, name, source)


def _check(value: object, hint: Any, where: str, source: str) -> None:
    if value is None or hint is Any or hint is object:
        return
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if not any(_matches(value, option) for option in args):
            _wrong(where, value, describe(hint), source)
        for option in args:  # the table or list among the options: check inside it too
            if option is not type(None) and _matches(value, option) and isinstance(value, (dict, list)):
                _check(value, option, where, source)
                return
        return
    if not _matches(value, hint):
        _wrong(where, value, describe(hint), source)
    if typing.is_typeddict(hint):
        assert isinstance(value, dict)
        fields = hints(hint)
        for key, item in value.items():
            if key in fields:  # unknown keys are tolerated: see the module docstring
                _check(item, fields[key], f"{where}.{key}", source)
    elif origin in (dict, Mapping):
        assert isinstance(value, dict)
        for key, item in value.items():
            _check(item, args[1], f"{where}.{key}", source)
    elif origin is list:
        assert isinstance(value, list)
        for index, item in enumerate(value):
            _check(item, args[0], f"{where}[{index}]", source)


def _matches(value: object, hint: Any) -> bool:
    if value is None or hint is Any or hint is object:
        return True
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_matches(value, option) for option in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if hint in (int, float):  # JSON has one kind of number; a writer may give 3.0 for a count
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is bool:
        return isinstance(value, bool)
    if hint is type(None):
        return value is None
    if typing.is_typeddict(hint) or origin in (dict, Mapping):
        return isinstance(value, dict)
    if origin is list:
        return isinstance(value, list)
    raise TypeError(f"result schema: no rule for {hint!r}")


def describe(hint: Any) -> str:
    """A type as the docs and the errors say it: a number, text, true or false, a table, a list of ..."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        named = [describe(option) for option in args if option is not type(None)]
        return " or ".join(named) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return " | ".join(f'"{arg}"' for arg in args)
    if hint is Any or hint is object:  # object: a value of the user's own shape (a scenario's sampling)
        return "anything"
    if hint in (int, float):
        return "a number"
    if hint is str:
        return "text"
    if hint is bool:
        return "true or false"
    if typing.is_typeddict(hint):
        return f"a table ({hint.__name__})"
    if origin in (dict, Mapping):
        return f"a table of {describe(args[1])}"
    if origin is list:
        return f"a list of {describe(args[0])}"
    return str(hint)


def _wrong(where: str, value: object, expected: str, source: str) -> None:
    raise ResultError(
        f"{source}: {where} is {_kind(value)}, expected {expected}; the file is damaged: re-record the run"
    )


def _kind(value: object) -> str:
    if value is None:
        return "missing"
    names = {
        dict: "a table",
        list: "a list",
        str: "text",
        bool: "true/false",
        int: "a number",
        float: "a number",
    }
    return names.get(type(value), type(value).__name__)


def sections() -> list[type]:
    """Every TypedDict of the schema, result.json first, then in the order they are reached."""
    found: list[type] = []

    def visit(hint: Any) -> None:
        if typing.is_typeddict(hint) and hint not in found:
            found.append(hint)
            for field_hint in hints(hint).values():
                visit(field_hint)
        for arg in typing.get_args(hint):
            visit(arg)

    visit(ResultFile)
    return found


def markdown() -> str:
    """docs/result-schema.md, generated from the types above (tests fail when the committed file differs)."""
    lines = [
        "# result.json schema",
        "",
        "Generated from `profiler/rundir/schema.py` by `python -m infer_prof.profiler.rundir.schema > docs/result-schema.md`;",
        "do not edit by hand. "
        f"schema_version {SCHEMA_VERSION}; files from version {OLDEST_READABLE_VERSION} on are read.",
        "Every field below the top level may be null (not measured); keys not listed are kept and ignored.",
        "",
    ]
    for section in sections():
        doc = " ".join((section.__doc__ or "").split())
        lines += [f"## {section.__name__}", ""]
        if doc:
            lines += [doc, ""]
        lines += ["| field | type |", "|---|---|"]
        for name, hint in hints(section).items():
            lines.append(f"| `{name}` | {describe(hint)} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())
