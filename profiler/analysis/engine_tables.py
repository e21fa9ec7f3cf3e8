"""One frame-rule table per engine: its components, what its waits mean, and which frames give a thread its role.

A table is data, like classify.py's component rules: rows of (label, file pattern, function pattern
or "" for any function), regular expressions searched in py-spy's frame file and qualname.

    components   component of the innermost Python frame that matches (scheduler, sampler, model, api...)
    waits        kind of a wait, from the nearest Python caller of the waiting call (lock, queue, poll,
                 spin, sleep) that is not wait machinery itself:
                   idle      a thread waiting for work (a pool worker on its queue, an event loop in epoll)
                   queueing  a request waiting behind another for the engine (a server's engine lock)
                   worker    the engine loop waiting for its model worker (another process or thread)
                   client    a client waiting for its tokens or results (the load generator)
    wait_frames  Python functions whose own samples are waits, with their default kind: spin-waits,
                 polls, and the callers of a C-level acquire that Python-only stacks cannot see
    roles        a thread whose busy samples run under such a frame does that job ("engine loop",
                 "model worker", "api", "tokenizer")
    probes       functions `run --launch CMD --probe` times from inside the server, as rows of (component,
                 module, qualname): "step" marks the engine's step (the yardstick), the other components
                 are timed within it (profiler/inject/sitecustomize.py, profiler/analysis/probe_spans.py)
    step_size    (module, qualname, attribute): one of the probes, called once a step, whose return value's
                 attribute counts the step's work (tokens scheduled); the probe's in-run A/B then pairs
                 only steps of about equal size, since a step's time follows its batch far more than the probe

Your own engine: write a TOML file with the same rows (docs/engine-tables.md) and put it in
~/.config/infer-prof/engines/, or name files or folders in INFER_PROF_ENGINE_TABLES (os.pathsep
between them); user tables are read before the built-in ones, so their rows win.

    name = "myengine"
    components = [["scheduler", "myengine/sched\\.py$", ""], ["model", "myengine/model/", ""]]
    waits = [["idle", "myengine/loop\\.py$", "wait_for_requests"]]
    wait_frames = [["idle", "myengine/shm\\.py$", "spin"]]
    roles = [["engine loop", "myengine/loop\\.py$", "run_loop"]]
    probes = [["step", "myengine.loop", "Loop.step"], ["scheduler", "myengine.sched", "Scheduler.schedule"]]
    step_size = ["myengine.sched", "Scheduler.schedule", "num_tokens"]
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import TargetError, read_toml
from ..rundir.components import COMPONENTS, CONTROL_PATHS

Row = tuple[str, str, str | None]  # (label, file pattern, function pattern or None)
ProbeRow = tuple[str, str, str]  # (component or "step", module, qualname in it)
SizeRow = tuple[str, str, str]  # (module, qualname, attribute of its return value)
TABLE_KEYS = ("name", "components", "waits", "wait_frames", "roles", "detect", "probes", "step_size")

WAIT_KINDS = ("idle", "queueing", "worker", "client")
ROLES = ("engine loop", "model worker", "api", "tokenizer")
PROBE_LABELS = ("step", *CONTROL_PATHS, "model", "worker", "api")
ENV_VAR = "INFER_PROF_ENGINE_TABLES"
USER_FOLDER = Path("~/.config/infer-prof/engines")


@dataclass(frozen=True)
class EngineTable:
    """One engine's rows (see the module docstring)."""

    name: str
    components: tuple[Row, ...] = ()
    waits: tuple[Row, ...] = ()
    wait_frames: tuple[Row, ...] = ()
    roles: tuple[Row, ...] = ()
    source: str = "built-in"
    detect: tuple[str, ...] = field(
        default=()
    )  # file patterns whose frames say this engine runs in a process
    probes: tuple[ProbeRow, ...] = ()
    step_size: SizeRow | None = None


# -- built-in tables ---------------------------------------------------------------------------------------

OURS = EngineTable(
    name="infer-prof",
    roles=(
        ("engine loop", r"(^|/)engine/engine\.py$", r"Engine\._(run|step|loop)"),
        ("api", r"(^|/)profiler/serve/", None),
    ),
    detect=(r"(^|/)engine/engine\.py$",),
)

# vLLM v1 (0.8-0.32): APIServer (AsyncLLM, the output processor and detokenizer run in its event loop),
# EngineCore (run_busy_loop: schedule -> execute_model on the workers -> update_from_output) and Worker
# processes (worker_busy_loop -> the model runner). Paths as py-spy prints them under site-packages.
VLLM = EngineTable(
    name="vllm",
    components=(
        ("scheduler", r"(^|/)vllm/(v1/core/sched/|core/(scheduler|policy|interfaces)\.py)", None),
        (
            "scheduler",
            r"(^|/)vllm/v1/engine/core\.py$",
            (
                r"update_from_output|_handle_client_request|add_request|"
                r"abort_requests|_process_aborts_queue"
            ),
        ),
        (
            "kv_alloc",
            (
                r"(^|/)vllm/(v1/core/(kv_cache_manager|block_pool|kv_cache_utils|kv_cache_coordinator|"
                r"single_type_kv_cache_manager)\.py|core/block_manager\w*\.py|core/block/)"
            ),
            None,
        ),
        (
            "sampler",
            r"(^|/)vllm/(v1/sample/|model_executor/layers/sampler\.py|model_executor/sampling_metadata\.py)",
            None,
        ),
        (
            "detokenizer",
            (
                r"(^|/)vllm/(v1/engine/(detokenizer|output_processor|logprobs)\.py|"
                r"transformers_utils/detokenizer\w*\.py|tokenizers/detokenizer\w*\.py)"
            ),
            None,
        ),
        (
            "tokenizer",
            (
                r"(^|/)vllm/(transformers_utils/tokenizer\w*|v1/engine/(processor|input_processor)|"
                r"inputs/preprocess|renderers?/\w+|tokenizers/\w+)\.py"
            ),
            None,
        ),
        # Input preparation: the model runner's batch and metadata building, before the forward.
        (
            "prepare",
            r"(^|/)vllm/v1/worker/(\w*model_runner|gpu/\w+|cpu/\w+)\.py$",
            (
                r"_prepare_inputs|_update_states|_prepare|prepare_|_build_attention_metadata|_calc_|_get_cumsum|"
                r"_preprocess|condense|_make_|_compute_"
            ),
        ),
        (
            "prepare",
            r"(^|/)vllm/v1/(worker/(gpu_)?input_batch|worker/block_table|attention/backends/\w+)\.py$",
            r"build|prepare|refresh|commit|_make|add_request|remove_request|condense|append_row|move_row|swap",
        ),
        (
            "api",
            r"(^|/)vllm/(entrypoints/|v1/engine/(async_llm|core_client)\.py|engine/async_llm_engine\.py)",
            None,
        ),
        # Not v1/executor/: in EngineCore its frames are the loop sending work to the Worker and waiting for it.
        (
            "model",
            (
                r"(^|/)vllm/(model_executor/|v1/worker/|worker/|attention/|v1/attention/|_custom_ops\.py|"
                r"distributed/(?!device_communicators/shm_broadcast|utils\.py))"
            ),
            None,
        ),
    ),
    waits=(
        (
            "idle",
            r"(^|/)vllm/v1/executor/multiproc_executor\.py$",
            r"worker_busy_loop|wait_for_termination|monitor",
        ),
        (
            "worker",
            r"(^|/)vllm/v1/executor/",
            None,
        ),  # collective_rpc / FutureWrapper.result: the loop waits on a Worker
        ("worker", r"(^|/)vllm/v1/engine/core\.py$", r"EngineCore\.step|step_with_batch_queue|execute_model"),
        (
            "idle",
            r"(^|/)vllm/v1/engine/core\.py$",
            (
                r"_process_input_queue|process_input_sockets|process_output_sockets|"
                r"run_busy_loop|_perform_handshake|startup"
            ),
        ),
        ("idle", r"(^|/)vllm/v1/engine/(core_client|coordinator|async_llm)\.py$", None),
        ("idle", r"(^|/)vllm/(utils/|v1/utils\.py|usage/|v1/metrics/|entrypoints/)", None),
    ),
    wait_frames=(
        # The shared-memory broadcast queue spins (sched_yield) while it has nothing to read.
        (
            "idle",
            r"(^|/)vllm/distributed/device_communicators/shm_broadcast\.py$",
            r"SpinCondition\.wait|acquire_read|acquire_write|dequeue|wait_until_ready|_spin|_wait",
        ),
        ("idle", r"(^|/)vllm/distributed/utils\.py$", r"sched_yield"),
    ),
    roles=(
        (
            "engine loop",
            r"(^|/)vllm/v1/engine/core\.py$",
            r"run_busy_loop|EngineCore\.step|_process_engine_step",
        ),
        (
            "model worker",
            r"(^|/)vllm/v1/executor/multiproc_executor\.py$",
            r"worker_busy_loop|_execute_worker_rpc",
        ),
        ("model worker", r"(^|/)vllm/v1/worker/", None),
        ("api", r"(^|/)vllm/(entrypoints/|v1/engine/async_llm\.py)", None),
    ),
    detect=(r"(^|/)vllm/",),
    # The step is EngineCore's; the loop hands the batch to its Worker (execute_model, non-blocking) and waits
    # for the reply (FutureWrapper.result, sample_tokens). The Worker's model runner, and the API server's
    # input and output processors, are timed in their own processes.
    probes=(
        ("step", "vllm.v1.engine.core", "EngineCore.step"),
        ("step", "vllm.v1.engine.core", "EngineCore.step_with_batch_queue"),
        ("scheduler", "vllm.v1.core.sched.scheduler", "Scheduler.schedule"),
        ("scheduler", "vllm.v1.core.sched.scheduler", "Scheduler.update_from_output"),
        ("worker", "vllm.v1.executor.multiproc_executor", "MultiprocExecutor.execute_model"),
        ("worker", "vllm.v1.executor.multiproc_executor", "MultiprocExecutor.sample_tokens"),
        ("worker", "vllm.v1.executor.multiproc_executor", "FutureWrapper.result"),
        # execute_model's own time is mostly the LM head (compute_logits) and the forward's glue: model time.
        ("model", "vllm.v1.worker.gpu_model_runner", "GPUModelRunner.execute_model"),
        ("prepare", "vllm.v1.worker.gpu_model_runner", "GPUModelRunner._update_states"),
        ("prepare", "vllm.v1.worker.gpu_model_runner", "GPUModelRunner._prepare_inputs"),
        ("model", "vllm.v1.worker.gpu_model_runner", "GPUModelRunner._model_forward"),
        ("sampler", "vllm.v1.worker.gpu_model_runner", "GPUModelRunner.sample_tokens"),
        ("sampler", "vllm.v1.worker.gpu_model_runner", "GPUModelRunner._sample"),
        ("detokenizer", "vllm.v1.engine.output_processor", "OutputProcessor.process_outputs"),
        ("tokenizer", "vllm.v1.engine.input_processor", "InputProcessor.process_inputs"),
        ("api", "vllm.entrypoints.openai.completion.serving", "OpenAIServingCompletion.create_completion"),
        (
            "api",
            "vllm.entrypoints.openai.chat_completion.serving",
            "OpenAIServingChat.create_chat_completion",
        ),
    ),
    # SchedulerOutput: the tokens of every sequence in the step (a decode step's batch; a prefill's prompt).
    step_size=("vllm.v1.core.sched.scheduler", "Scheduler.schedule", "total_num_scheduled_tokens"),
)

SGLANG = EngineTable(
    name="sglang",
    components=(
        ("scheduler", r"(^|/)sglang/srt/managers/(scheduler|schedule_policy|schedule_batch)\w*\.py$", None),
        ("kv_alloc", r"(^|/)sglang/srt/mem_cache/", None),
        ("sampler", r"(^|/)sglang/srt/(layers/sampler\.py|sampling/)", None),
        ("detokenizer", r"(^|/)sglang/srt/managers/detokenizer_manager\.py$", None),
        ("tokenizer", r"(^|/)sglang/srt/(hf_transformers_utils|utils/hf_transformers_utils)\.py$", None),
        ("api", r"(^|/)sglang/srt/(entrypoints/|openai_api/|managers/tokenizer_manager\.py)", None),
        ("model", r"(^|/)sglang/srt/(models/|model_executor/|layers/)", None),
    ),
    waits=(("idle", r"(^|/)sglang/srt/managers/\w+\.py$", r"recv|event_loop"),),
    roles=(
        ("engine loop", r"(^|/)sglang/srt/managers/scheduler\.py$", r"event_loop|run_batch"),
        ("tokenizer", r"(^|/)sglang/srt/managers/detokenizer_manager\.py$", None),
    ),
    detect=(r"(^|/)sglang/",),
)

# llama-cpp-python's server: FastAPI in uvicorn; each request takes the model behind llama_outer_lock /
# llama_inner_lock in get_llama_proxy (a sync dependency run in an AnyIO worker thread), and the token
# loop (Llama.generate -> eval -> llama_decode, sample) runs in AnyIO worker threads too.
LLAMA_CPP = EngineTable(
    name="llama-cpp-python",
    components=(
        ("sampler", r"(^|/)llama_cpp/(llama|_internals)\.py$", r"sampl"),
        ("detokenizer", r"(^|/)llama_cpp/(llama|_internals)\.py$", r"detokenize|token_to_piece"),
        ("tokenizer", r"(^|/)llama_cpp/(llama|_internals|llama_tokenizer)\.py$", r"tokeniz"),
        ("api", r"(^|/)llama_cpp/server/", r"^(?!get_llama_proxy)"),
        ("queue", r"(^|/)llama_cpp/server/app\.py$", r"get_llama_proxy"),
        ("model", r"(^|/)llama_cpp/", None),
    ),
    waits=(("queueing", r"(^|/)llama_cpp/server/app\.py$", r"get_llama_proxy"),),
    # The lock's C acquire is invisible without --native: the dependency's own samples are the wait.
    wait_frames=(("queueing", r"(^|/)llama_cpp/server/app\.py$", r"get_llama_proxy"),),
    roles=(
        ("engine loop", r"(^|/)llama_cpp/llama\.py$", r"generate|eval|_create_completion|sample"),
        ("api", r"(^|/)llama_cpp/server/", None),
    ),
    detect=(r"(^|/)llama_cpp/",),
    # One eval per decoded token: its time less llama_decode's is the Python around the C.
    probes=(
        ("step", "llama_cpp.llama", "Llama.eval"),
        ("model", "llama_cpp._internals", "LlamaContext.decode"),
        ("sampler", "llama_cpp.llama", "Llama.sample"),
        ("detokenizer", "llama_cpp.llama", "Llama.detokenize"),
        ("tokenizer", "llama_cpp.llama", "Llama.tokenize"),
    ),
)

# transformers: model.generate's decoding loop (_sample / _beam_search) and `transformers serve`
# (commands/serving.py; its generation runs in a thread of its own, streamed through a TextIteratorStreamer).
TRANSFORMERS = EngineTable(
    name="transformers",
    components=(
        (
            "sampler",
            r"(^|/)transformers/generation/(logits_process|logits_processor|stopping_criteria)\.py$",
            None,
        ),
        ("sampler", r"(^|/)transformers/generation/utils\.py$", r"_sample_token|sample_token"),
        ("detokenizer", r"(^|/)transformers/generation/streamers\.py$", None),
        # transformers serve (5.x): DirectStreamer.put decodes each new token on the generation thread.
        ("detokenizer", r"(^|/)transformers/cli/serving/utils\.py$", r"Streamer|put|_enqueue|decode"),
        (
            "detokenizer",
            r"(^|/)transformers/tokenization_utils\w*\.py$",
            r"decode|convert_ids_to_tokens|_decode",
        ),
        ("tokenizer", r"(^|/)transformers/tokenization_utils\w*\.py$", None),
        (
            "prepare",
            r"(^|/)transformers/generation/utils\.py$",
            (
                r"prepare_inputs_for_generation|_update_model_kwargs|"
                r"_prepare_|_get_initial_cache_position|_cache_dependant"
            ),
        ),
        ("kv_alloc", r"(^|/)transformers/cache_utils\.py$", None),
        (
            "scheduler",
            r"(^|/)transformers/generation/continuous_batching/(scheduler|requests|cache)\w*\.py$",
            None,
        ),
        (
            "model",
            (
                r"(^|/)transformers/(models/|modeling_\w+\.py|integrations/|masking_utils\.py|pytorch_utils\.py|"
                r"activations\.py)"
            ),
            None,
        ),
        ("model", r"(^|/)transformers/generation/continuous_batching/", None),
        (
            "api",
            r"(^|/)transformers/(commands/serving\.py|cli/serve\.py|commands/serve\w*\.py|cli/serving/)",
            None,
        ),
    ),
    # A request handler reading the streamer waits for its next token: a client of the generation thread.
    waits=(
        ("client", r"(^|/)transformers/generation/streamers\.py$", None),
        ("idle", r"(^|/)transformers/cli/serving/utils\.py$", r"InferenceThread\._run|_run$"),
        ("idle", r"(^|/)transformers/(commands/serving\.py|cli/serve\.py|cli/serving/)", None),
    ),
    roles=(
        (
            "engine loop",
            r"(^|/)transformers/generation/(utils\.py|continuous_batching/)",
            r"generate|_sample|_beam_search|_assisted_decoding|_generation_step|_run_generation_loop|_inner_generation",
        ),
        ("api", r"(^|/)transformers/(commands/serving\.py|cli/serve\.py|cli/serving/)", None),
    ),
    detect=(r"(^|/)transformers/generation/",),
)

# Every Python server's helpers, whatever the engine: pool workers waiting for a job, event loops in
# their selector, monitor threads. Their waits are threads waiting for work.
GENERIC = EngineTable(
    name="generic",
    components=(
        ("api", r"(^|/)profiler/serve/", None),
        (
            "api",
            (
                r"(^|/)(uvicorn|starlette|fastapi|h11|httptools|anyio|sse_starlette|pydantic|pydantic_core|aiohttp|"
                r"uvloop|asyncio|websockets)/"
            ),
            None,
        ),
        ("tokenizer", r"(^|/)tokenizers/", None),
    ),
    waits=(
        ("idle", r"(^|/)concurrent/futures/(thread|process)\.py$", r"_worker|_process_worker|run"),
        (
            "idle",
            r"(^|/)anyio/(_backends/_asyncio|to_thread|_core/_\w+)\.py$",
            r"WorkerThread\.run$|^run$|_worker",
        ),
        ("idle", r"(^|/)tqdm/(_monitor|std)\.py$", None),
        (
            "idle",
            r"(^|/)(asyncio/(base_events|runners|selector_events|unix_events|events)|selectors|socketserver)\.py$",
            None,
        ),
        # Not zmq's poll nor multiprocessing's Connection: they are wait machinery (wait_frames below), and
        # their caller says what the wait is for (vLLM's EngineCore polls for its Worker's reply).
        ("idle", r"(^|/)(uvloop|uvicorn)/", None),
        ("idle", r"(^|/)multiprocessing/(queues|pool|resource_tracker|managers|popen_\w+|util)\.py$", None),
        ("idle", r"(^|/)(prometheus_client|huggingface_hub|torch/_inductor/compile_worker)/", None),
        ("idle", r"(^|/)threading\.py$", r"Timer\.run|_bootstrap"),
    ),
    wait_frames=(
        # The event loop's own frames: with uvloop the loop runs in C below these, so a Python-only
        # stack shows them alone whenever no Python callback runs.
        (
            "idle",
            r"(^|/)asyncio/(runners|base_events)\.py$",
            r"^(Runner\.)?run$|run_until_complete|run_forever",
        ),
        ("idle", r"(^|/)uvloop/__init__\.py$", r"^run$"),
        ("idle", r"(^|/)zmq/(sugar/poll|sugar/socket|_future)\.py$", r"poll|recv"),
        ("idle", r"(^|/)multiprocessing/connection\.py$", r"wait|_poll|poll|recv|_recv"),
        # A pool worker's C-level SimpleQueue.get is invisible without --native: its loop's own line is the wait.
        ("idle", r"(^|/)concurrent/futures/thread\.py$", r"^_worker$"),
    ),
    roles=(
        ("api", r"(^|/)(uvicorn|starlette|fastapi|h11|httptools|sse_starlette|aiohttp)/", None),
        # The standard library's HTTP server: a handler thread blocked on its request's token queue is the API
        # waiting for its tokens, not an engine loop waiting for work.
        ("api", r"(^|/)http/server\.py$", r"handle_one_request|handle$"),
        ("tokenizer", r"(^|/)tokenizers/", None),
    ),
)

BUILTIN_TABLES: tuple[EngineTable, ...] = (OURS, VLLM, SGLANG, LLAMA_CPP, TRANSFORMERS, GENERIC)


# -- user tables ------------------------------------------------------------------------------------------------


def _rows(data: object, key: str, path: Path, allowed: tuple[str, ...] | None) -> tuple[Row, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise TargetError(
            f"engine table {path}: {key!r} must be a list of [label, file pattern, function pattern] rows"
        )
    rows = []
    for index, row in enumerate(data):
        if not (isinstance(row, list) and len(row) in (2, 3) and all(isinstance(cell, str) for cell in row)):
            raise TargetError(
                f"engine table {path}: {key}[{index}] must be [label, file pattern, function pattern], "
                f'three strings (the last may be "")'
            )
        label, file_pattern = row[0], row[1]
        function_pattern = row[2] if len(row) == 3 and row[2] else None
        if allowed is not None and label not in allowed:
            raise TargetError(
                f"engine table {path}: {key}[{index}] label {label!r}: use one of {', '.join(allowed)}"
            )
        for pattern in (file_pattern, function_pattern):
            try:
                re.compile(pattern or "")
            except re.error as exc:
                raise TargetError(
                    f"engine table {path}: {key}[{index}] pattern {pattern!r} is not a regular "
                    f"expression ({exc})"
                ) from None
        rows.append((label, file_pattern, function_pattern))
    return tuple(rows)


def load_table(path: str | Path) -> EngineTable:
    """One user table from a TOML file (format in the module docstring); TargetError naming what is wrong."""
    path = Path(path).expanduser()
    data, _text = read_toml(path, TargetError, kind="engine table (docs/engine-tables.md)")
    unknown = set(data) - set(TABLE_KEYS)
    if unknown:
        raise TargetError(
            f"engine table {path}: unknown key(s) {', '.join(sorted(unknown))}; use {', '.join(TABLE_KEYS)}"
        )
    components = (*COMPONENTS, "model")
    detect = data.get("detect") or []
    if not isinstance(detect, list) or not all(isinstance(item, str) for item in detect):
        raise TargetError(f"engine table {path}: 'detect' must be a list of file patterns")
    if not isinstance(data.get("name", ""), str):
        raise TargetError(f"engine table {path}: 'name' must be a string")
    probes = _probe_rows(data.get("probes"), path)
    return EngineTable(
        name=str(data.get("name") or path.stem),
        components=_rows(data.get("components"), "components", path, components),
        waits=_rows(data.get("waits"), "waits", path, WAIT_KINDS),
        wait_frames=_rows(data.get("wait_frames"), "wait_frames", path, WAIT_KINDS),
        roles=_rows(data.get("roles"), "roles", path, ROLES),
        source=str(path),
        detect=tuple(detect),
        probes=probes,
        step_size=_step_size(data.get("step_size"), probes, path),
    )


def _step_size(data: object, probes: tuple[ProbeRow, ...], path: Path) -> SizeRow | None:
    if data is None:
        return None
    if not (
        isinstance(data, list) and len(data) == 3 and all(isinstance(cell, str) and cell for cell in data)
    ):
        raise TargetError(
            f"engine table {path}: step_size must be [module, function, attribute], three non-empty strings "
            '(e.g. ["myengine.sched", "Scheduler.schedule", "num_tokens"])'
        )
    module, function, attribute = data
    if not any(row[1:] == (module, function) for row in probes):
        raise TargetError(
            f"engine table {path}: step_size names {module}:{function}, which is not one of its probes; "
            "add it to probes (the size is read as that probe returns)"
        )
    if not attribute.isidentifier():
        raise TargetError(f"engine table {path}: step_size attribute {attribute!r} is not an attribute name")
    return (module, function, attribute)


def _probe_rows(data: object, path: Path) -> tuple[ProbeRow, ...]:
    if data is None:
        return ()
    rows = []
    for index, row in enumerate(data if isinstance(data, list) else [None]):
        if not (
            isinstance(row, list) and len(row) == 3 and all(isinstance(cell, str) and cell for cell in row)
        ):
            raise TargetError(
                f"engine table {path}: probes[{index}] must be [component, module, function], three "
                'non-empty strings (e.g. ["scheduler", "myengine.sched", "Scheduler.schedule"])'
            )
        if row[0] not in PROBE_LABELS:
            raise TargetError(
                f"engine table {path}: probes[{index}] component {row[0]!r}: use one of {', '.join(PROBE_LABELS)}"
            )
        if not re.fullmatch(r"[A-Za-z_][\w.]*", row[1]) or not re.fullmatch(r"[A-Za-z_][\w.]*", row[2]):
            raise TargetError(
                f"engine table {path}: probes[{index}] {row[1]!r}, {row[2]!r}: give a dotted module "
                "name and a function or Class.method in it"
            )
        rows.append((row[0], row[1], row[2]))
    return tuple(rows)


def table_paths(spec: str | None = None) -> list[Path]:
    """TOML files named by INFER_PROF_ENGINE_TABLES (files or folders) and those in ~/.config/infer-prof/engines."""
    spec = os.environ.get(ENV_VAR, "") if spec is None else spec
    found: list[Path] = []
    for entry in [part for part in spec.split(os.pathsep) if part] + [str(USER_FOLDER)]:
        path = Path(entry).expanduser()
        if path.is_dir():
            found.extend(sorted(path.glob("*.toml")))
        elif path.is_file() or entry in spec.split(os.pathsep):
            found.append(path)  # a named file that is missing is an error load_table reports
    return list(dict.fromkeys(found))


def user_tables(paths: Iterable[str | Path] | None = None) -> tuple[EngineTable, ...]:
    """The user's tables (see table_paths), read now."""
    return tuple(load_table(path) for path in (table_paths() if paths is None else paths))


def all_tables(extra: Iterable[EngineTable] = ()) -> tuple[EngineTable, ...]:
    """Tables in the order their rows are tried: the ones given, the user's, then the built-in ones."""
    return (*extra, *user_tables(), *BUILTIN_TABLES)
