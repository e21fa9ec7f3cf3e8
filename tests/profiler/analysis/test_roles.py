"""Threads' roles, waits and the foreign verdict, driven by py-spy dumps of vLLM, llama-cpp-python's server and `transformers serve`.

The dumps under fixtures/pyspy/ say in their first line whether they were recorded or hand-made from the
frames quoted in issue #36; none needs vLLM installed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import get_type_hints

import pytest

from infer_prof.errors import TargetError
from infer_prof.profiler.analysis.classify import classify, parse_frame, parse_line, parse_raw
from infer_prof.profiler.analysis.engine_tables import BUILTIN_TABLES, load_table, table_paths
from infer_prof.profiler.analysis.foreign import foreign_breakdown, foreign_verdict
from infer_prof.profiler.analysis.roles import process_roles
from infer_prof.profiler.rundir.schema import ForeignProcess, SampledThread, ThreadSampleCounts
from infer_prof.profiler.session.target.server_split import (
    process_split,
    server_breakdown,
    server_verdict,
    thread_table,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pyspy"


def dump(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text()


def python_only(text: str) -> str:
    """The same samples as py-spy --nonblocking sees them: native frames left out, equal stacks merged."""
    merged: Counter[str] = Counter()
    for line in text.splitlines():
        stack = parse_line(line)
        if stack is None:
            continue
        head = f"thread ({stack.thread_id}): {stack.thread_name}"
        frames = [f"{frame.function} ({frame.where}:1)" for frame in stack.frames if frame.python]
        merged[";".join([head, *frames])] += stack.count
    return "\n".join(f"{stack} {count}" for stack, count in merged.items())


def roles(name: str, native: bool = True):  # type: ignore[no-untyped-def]
    text = dump(name)
    return process_roles(parse_raw(text if native else python_only(text)))


# -- native frames are told by their file -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "gemm_micro<4> (cpu_attn_vec.hpp:121)",
        "_mm512_loadu_ps (avx512fintrin.h)",
        "uv__io_poll (linux.c:1400)",
        "_PyEval_EvalFrameDefault (ceval.c:4769)",
        "select_epoll_poll (selectmodule.c.h:841)",
        "kernel (ops.cu:10)",
        "llama_decode (libllama.so)",
    ],
)
def test_a_compiled_files_frame_is_native_whatever_its_shape(text: str) -> None:
    assert not parse_frame(text).python


def test_python_frames_stay_python() -> None:
    assert parse_frame("Scheduler.schedule (vllm/v1/core/sched/scheduler.py:300)").python
    assert parse_frame("<module> (<string>:1)").python
    assert parse_frame("main (vllm:8)").python  # an entry-point script has no extension


def _category(frames: str) -> tuple[str, str | None]:
    stack = parse_line(f"thread (1): t;{frames} 1")
    assert stack is not None
    label = classify(stack)
    return label.category, label.wait


def test_vllm_cpu_attention_and_intrinsics_are_kernel_not_interpreter() -> None:
    attention = (
        "CPUAttentionBackendImpl.forward (vllm/v1/attention/backends/cpu_attn.py:310);"
        "torch::jit::invokeOperatorFromPython (libtorch_python.so);c10::Dispatcher::callBoxed (libtorch_cpu.so);"
        "cpu_attention_with_kv_cache (_C.abi3.so);gemm_micro<4> (cpu_attn_vec.hpp:121)"
    )
    assert _category(attention)[0] == "kernel"
    assert _category(attention + ";_mm512_loadu_ps (avx512fintrin.h)")[0] == "kernel"
    # Named code in an extension with no better name is native work, not the interpreter.
    assert (
        _category("decode (tokenizers/implementations/base.py:9);tokenizers::decode (tokenizers.abi3.so)")[0]
        == "other"
    )
    # CPython's own C frames are the interpreter.
    assert _category("f (mylib/a.py:1);_PyEval_EvalFrameDefault (ceval.c:4769)")[0] == "interpreter"


@pytest.mark.parametrize(
    ("frames", "category", "kind"),
    [
        # uvloop waiting in epoll (native), and the same loop with Python frames only
        (
            (
                "run (asyncio/runners.py:190);Runner.run (asyncio/runners.py:118);__pyx_f_6uvloop_4loop_4Loop__run (loop.c:21000);"
                "uv__io_poll (linux.c:1400);epoll_pwait (libc.so.6)"
            ),
            "idle",
            "idle",
        ),
        (
            "run (uvloop/__init__.py:105);run (asyncio/runners.py:190);Runner.run (asyncio/runners.py:118)",
            "idle",
            "idle",
        ),
        # pool workers waiting for a job: anyio, concurrent.futures (native and Python-only)
        (
            "WorkerThread.run (anyio/_backends/_asyncio.py:986);Queue.get (queue.py:171);Condition.wait (threading.py:327)",
            "idle",
            "idle",
        ),
        ("_worker (concurrent/futures/thread.py:81)", "idle", "idle"),
        (
            "TMonitor.run (tqdm/_monitor.py:60);Event.wait (threading.py:629);Condition.wait (threading.py:331)",
            "idle",
            "idle",
        ),
        (
            (
                "EngineCoreProc.process_input_sockets (vllm/v1/engine/core.py:1888);Poller.poll (zmq/sugar/poll.py:106);"
                "zmq_poll (libzmq.so.5);__poll (libc.so.6)"
            ),
            "idle",
            "idle",
        ),
        # vLLM's shared-memory queue spins: idle in the Worker's loop, the step's wait on the Worker in EngineCore
        (
            (
                "WorkerProc.worker_busy_loop (vllm/v1/executor/multiproc_executor.py:1041);MessageQueue.dequeue "
                "(vllm/distributed/device_communicators/shm_broadcast.py:970);SpinCondition.wait "
                "(vllm/distributed/device_communicators/shm_broadcast.py:205);sched_yield (vllm/distributed/utils.py:50);"
                "__sched_yield (libc.so.6)"
            ),
            "idle",
            "idle",
        ),
        (
            (
                "EngineCore.step (vllm/v1/engine/core.py:675);FutureWrapper.result (vllm/v1/executor/multiproc_executor.py:90);"
                "MessageQueue.dequeue (vllm/distributed/device_communicators/shm_broadcast.py:970);SpinCondition.wait "
                "(vllm/distributed/device_communicators/shm_broadcast.py:205)"
            ),
            "waiting",
            "worker",
        ),
        (
            (
                "EngineCoreProc._process_input_queue (vllm/v1/engine/core.py:1588);Queue.get (queue.py:171);"
                "Condition.wait (threading.py:327)"
            ),
            "idle",
            "idle",
        ),
        # llama-cpp-python's server: a request waiting behind another for the model's lock (native and Python-only)
        (
            (
                "WorkerThread.run (anyio/_backends/_asyncio.py:986);_GeneratorContextManager.__enter__ (contextlib.py:137);"
                "get_llama_proxy (llama_cpp/server/app.py:75);lock_PyThread_acquire_lock (libpython3.11.so.1.0);"
                "PyThread_acquire_lock_timed (libpython3.11.so.1.0);0x7f3c1a2ae116 (libc.so.6)"
            ),
            "waiting",
            "queueing",
        ),
        (
            "WorkerThread.run (anyio/_backends/_asyncio.py:986);get_llama_proxy (llama_cpp/server/app.py:75)",
            "waiting",
            "queueing",
        ),
        # a lock with no table naming its caller stays contention, and so does the GIL under an idle caller's code
        ("Worker.step (mylib/worker.py:9);Condition.wait (threading.py:331)", "lock", None),
        (
            (
                "WorkerThread.run (anyio/_backends/_asyncio.py:986);_PyEval_EvalFrameDefault (ceval.c:1);"
                "pthread_cond_timedwait (libc.so.6)"
            ),
            "lock",
            None,
        ),
    ],
)
def test_waits_are_told_apart(frames: str, category: str, kind: str | None) -> None:
    assert _category(frames) == (category, kind)


# -- roles, by what threads do --------------------------------------------------------------------------


def test_vllm_worker_threads_are_not_merged_and_the_model_thread_is_the_engine_thread() -> None:
    process = roles("vllm-worker-native")
    tqdm = [thread for thread in process.threads if thread.name == "tqdm_monitor"]
    assert len(tqdm) == 2 and all(thread.role == "idle helper" for thread in tqdm)
    assert process.role == "model worker" and process.engine == "vllm"
    main = process.thread(process.engine_thread)
    assert main is not None and main.name == "MainThread"
    assert main.categories["kernel"] > main.categories["interpreter"] > 0
    assert main.components["sampler"] > 0  # torch's top-k/top-p inside vLLM's sampler


@pytest.mark.parametrize("native", [True, False])
def test_vllm_enginecore_picks_its_busy_loop_not_the_thread_idle_in_queue_get(native: bool) -> None:
    process = roles("vllm-enginecore-native", native)
    engine = process.thread(process.engine_thread)
    assert engine is not None and engine.name == "MainThread" and engine.role == "engine loop"
    assert engine.waits["worker"] > 0 and engine.waits["idle"] > 0 and engine.waits["lock"] == 0
    output = next(thread for thread in process.threads if thread.name == "Thread-2 (process_output_sockets)")
    assert output.role == "idle helper" and output.categories["lock"] == 0


def test_the_api_server_is_its_event_loop_even_when_it_mostly_waits() -> None:
    for native in (True, False):
        process = roles("vllm-apiserver-native" if native else "vllm-apiserver-python")
        assert process.role == "api" and process.engine_thread is None
        loop = next(thread for thread in process.threads if thread.name == "MainThread")
        assert loop.role == "api" and loop.categories["idle"] > 0.9 * loop.samples
        assert loop.categories["interpreter"] < 0.05 * loop.samples  # not "interpreter 100%"


def test_llama_server_pools_its_decode_threads_and_sees_queueing() -> None:
    process = roles("llama-server-native")
    engine_ids = set(process.engine_threads)
    assert len(engine_ids) == 2 and process.engine_thread in engine_ids
    for thread in process.threads:
        if thread.thread_id in engine_ids:
            assert (
                thread.role == "engine loop"
                and thread.categories["kernel"] > thread.categories["interpreter"]
            )
    waiting = next(thread for thread in process.threads if thread.waits["queueing"])
    assert waiting.role == "api" and waiting.thread_id not in engine_ids


def test_transformers_serve_generation_thread_not_tqdm() -> None:
    process = roles("transformers-serve-native")
    engine = process.thread(process.engine_thread)
    assert (
        engine is not None
        and engine.name == "Thread-1 (_run)"
        and engine.waits["idle"] == 30
        and engine.components["detokenizer"] > 0
        and process.engine == "transformers"
    )
    assert next(thread for thread in process.threads if thread.name == "tqdm_monitor").role == "idle helper"


def test_a_thread_working_in_code_no_table_names_is_said_unknown() -> None:
    process = process_roles(
        parse_raw(
            "thread (7): worker;run (mystery/loop.py:3);crunch (mystery/math.py:9) 50\n"
            "thread (8): helper;run (mystery/loop.py:3);Event.wait (threading.py:629) 50"
        )
    )
    mystery = process.thread(7)
    assert mystery is not None and mystery.role == "unknown" and "can't tell" in mystery.reason
    helper = process.thread(8)
    assert helper is not None and helper.role == "idle helper"
    assert helper.categories["idle"] == 50 and helper.categories["lock"] == 0  # a helper's wait is for work


# -- the verdict -------------------------------------------------------------------------------------------


def _verdict(*names: str, native: bool = True) -> dict:  # type: ignore[type-arg]
    processes = [
        process_roles(parse_raw(dump(name) if native else python_only(dump(name))), pid=100 + index).as_dict()
        for index, name in enumerate(names)
    ]
    return foreign_verdict(processes)


def test_llama_server_calls_python_small_and_says_it_saw_queueing() -> None:
    verdict = _verdict("llama-server-native")
    assert verdict["interpreter_share"] < 0.05 and verdict["foreign"]["loop"]["kernel"] > 0.9
    assert verdict["category"] != "lock"
    assert verdict["foreign"]["waits"]["queueing"] > 0
    assert any("queueing behind one another" in reason for reason in verdict["reasons"])


def test_vllm_three_processes_give_the_loops_share_and_the_critical_path() -> None:
    verdict = _verdict("vllm-apiserver-native", "vllm-enginecore-native", "vllm-worker-native")
    foreign = verdict["foreign"]
    assert foreign["engine_pid"] == 101 and verdict["rule"] is not None
    path = foreign["critical_path"]
    assert path["waiting_on_worker"] > 0.5 and path["worker"]["pid"] == 102 and path["worker"]["kernel"] > 0.5
    assert foreign["api"]["pid"] == 100 and foreign["api"]["gil_wait"] is not None
    assert {"scheduler", "worker:sampler"} <= set(foreign["amdahl"])
    scheduler = foreign["amdahl"]["scheduler"]
    assert scheduler["low"] < scheduler["bound"] < scheduler["high"]
    assert any("no C twin" in reason for reason in verdict["reasons"])
    assert [p["role"] for p in foreign["processes"]] == ["api", "engine loop", "model worker"]


def test_enginecore_alone_still_shows_the_wait_on_its_worker() -> None:
    verdict = _verdict("vllm-enginecore-native")
    assert verdict["foreign"]["critical_path"]["worker"] is None
    assert any("was not sampled" in reason for reason in verdict["reasons"])


def test_python_only_samples_still_give_a_bounded_verdict() -> None:
    native = _verdict("transformers-serve-native")
    bounded = _verdict("transformers-serve-native", native=False)
    assert bounded["rule"] is not None and bounded["interpreter_interval"]["method"].startswith("bounds")
    low, high = bounded["interpreter_interval"]["low"], bounded["interpreter_interval"]["high"]
    assert low <= native["interpreter_share"] <= high
    assert any("without --native" in spot for spot in bounded["blind_spots"])


def test_no_engine_thread_no_verdict_said_plainly() -> None:
    verdict = _verdict("vllm-apiserver-native")
    assert verdict["rule"] is None and "No engine loop" in verdict["reasons"][0]


# -- the server split for `run --target --pid` --------------------------------------------------------------


@pytest.mark.parametrize("native", [True, False])
def test_a_pid_run_of_another_engine_gets_a_verdict_in_either_sampling_mode(native: bool) -> None:
    text = dump("llama-server-native")
    sampling = {"status": "ok", "raw_text": text if native else python_only(text), "threads": {}}
    breakdown, engine_label, _ = server_breakdown(sampling, None, 10**10, [], pid=42)
    assert breakdown is not None and breakdown["processes"][0]["pid"] == 42
    assert breakdown["methods"]["samples"]["samples"] > 0 and "AnyIO worker thread" in engine_label
    verdict = server_verdict(breakdown, {"sampling": {"status": "ok"}})
    assert verdict["rule"] == "stay in Python" or not native  # Python-only bounds may straddle 1%
    assert verdict["rule"] is not None
    rows = thread_table(sampling, 42)
    assert (
        len([label for label in rows if label.startswith("AnyIO worker thread")]) == 4
    )  # four threads, not one


def test_process_split_is_json_ready_and_keyed_by_thread_id() -> None:
    import json

    process = process_split(dump("vllm-worker-native"), 7)
    assert json.loads(json.dumps(process))["pid"] == 7
    assert len({thread["thread_id"] for thread in process["threads"]}) == len(process["threads"])
    assert foreign_breakdown([process], 10**9)["processes"][0]["engine_thread"] == 4101


def test_a_process_row_has_the_keys_the_result_schema_names_and_no_other() -> None:
    # breakdown.processes is list[ForeignProcess]: the rows roles builds are what the schema (and its doc) say.
    process = process_split(dump("vllm-enginecore-native"), 7)
    assert set(process) == set(get_type_hints(ForeignProcess))
    for thread in process["threads"]:
        assert set(thread) == set(get_type_hints(SampledThread))
        assert set(thread["counts"]) == set(get_type_hints(ThreadSampleCounts))


# -- user tables -----------------------------------------------------------------------------------------------

MY_TABLE = """
name = "myengine"
components = [["scheduler", "myengine/sched\\\\.py$", ""], ["model", "myengine/model\\\\.py$", ""]]
waits = [["idle", "myengine/loop\\\\.py$", "wait_for_requests"]]
roles = [["engine loop", "myengine/loop\\\\.py$", "run_loop"]]
"""
MY_DUMP = """thread (1): MainThread;run_loop (myengine/loop.py:10);pick (myengine/sched.py:5) 30
thread (1): MainThread;run_loop (myengine/loop.py:11);forward (myengine/model.py:5);mkl_blas_sgemm (libtorch_cpu.so) 60
thread (1): MainThread;run_loop (myengine/loop.py:9);wait_for_requests (myengine/loop.py:3);Condition.wait (threading.py:331) 10
thread (2): Thread-1;work (myengine/stats.py:3) 20"""


def test_a_users_table_names_their_engines_loop_components_and_waits(tmp_path: Path) -> None:
    path = tmp_path / "myengine.toml"
    path.write_text(MY_TABLE)
    table = load_table(path)
    process = process_roles(parse_raw(MY_DUMP), tables=(table, *BUILTIN_TABLES))
    loop = process.thread(1)
    assert loop is not None and loop.role == "engine loop" and process.engine_thread == 1
    assert loop.components["scheduler"] == 30 and loop.components["model_kernels"] == 60
    assert loop.categories["idle"] == 10 and loop.categories["lock"] == 0
    # Without the table the same samples have no scheduler and their wait is contention.
    plain = process_roles(parse_raw(MY_DUMP), tables=BUILTIN_TABLES).thread(1)
    assert plain is not None and plain.components["scheduler"] == 0 and plain.categories["lock"] == 10


def test_tables_are_found_in_the_folder_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.toml").write_text(MY_TABLE)
    monkeypatch.setenv("INFER_PROF_ENGINE_TABLES", str(tmp_path))
    assert tmp_path / "a.toml" in table_paths()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name = 'x'\ncomponents = [['scheduler', '(']]", "not a regular expression"),
        ("name = 'x'\nroles = [['boss', 'a\\\\.py$', '']]", "use one of"),
        ("name = 'x'\nwait = []", "unknown key"),
        ("name = ", "malformed TOML"),
        ("name = 'x'\nstep_size = ['m', 'f']", r"step_size must be \[module, function, attribute\]"),
        ("name = 'x'\nstep_size = ['m', 'f', 'n']", "not one of its probes"),
        (
            "name = 'x'\nprobes = [['scheduler', 'm', 'f']]\nstep_size = ['m', 'f', 'n.x']",
            "not an attribute name",
        ),
    ],
)
def test_a_bad_table_is_one_error_naming_the_file(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(TargetError, match=words) as raised:
        load_table(path)
    assert str(path) in str(raised.value)
    with pytest.raises(TargetError, match="cannot read"):
        load_table(tmp_path / "missing.toml")


def test_an_engine_no_table_knows_still_gets_a_stand_in_said_plainly() -> None:
    text = (
        "thread (3): gen;Thread.run (threading.py:982);loop (mystery/gen.py:5) 40\n"
        "thread (4): http;serve_forever (socketserver.py:233);BaseSelector.select (selectors.py:415);"
        "epoll_wait (libc.so.6) 40"
    )
    process = process_roles(parse_raw(text))
    assert process.engine_thread == 3 and "can't tell" in process.notes[0]
    verdict = foreign_verdict([process.as_dict()])
    assert verdict["rule"] is not None and "can't tell which is the engine" in verdict["reasons"][0]


def test_a_worker_sampled_without_native_stacks_gets_no_kernel_split() -> None:
    verdict = _verdict("vllm-apiserver-native", "vllm-enginecore-native", "vllm-worker-native", native=False)
    worker = verdict["foreign"]["critical_path"]["worker"]
    assert worker["kernel"] is None and worker["interpreter"] is None
    assert any("cannot be told apart" in reason for reason in verdict["reasons"])


# -- recorded dumps (vLLM CPU starting up) ----------------------------------------------------------------------


def test_recorded_enginecore_waits_on_its_worker_and_its_monitor_is_an_idle_helper() -> None:
    process = roles("vllm-enginecore-startup")
    main = process.thread(5482)
    monitor = process.thread(6716)
    assert main is not None and monitor is not None
    # _initialize_kv_caches -> collective_rpc -> ... -> SpinCondition.wait -> zmq poll: the Worker profiles memory.
    assert main.waits["worker"] == main.samples and main.role == "engine loop"
    assert monitor.role == "idle helper" and monitor.waits["idle"] == monitor.samples
    assert process.engine_thread == 5482


def test_recorded_apiserver_uvloop_c_frames_are_native_and_its_loop_is_the_api() -> None:
    stack = parse_raw(dump("vllm-apiserver-startup"))[0]
    natives = {frame.function for frame in stack.frames if not frame.python}
    assert {"run_until_complete", "Py_XDECREF", "uv_run", "task_step_impl", "zmq_poll"} <= natives
    process = roles("vllm-apiserver-startup")
    loop = process.thread(4712)
    assert loop is not None and loop.role == "api" and loop.categories["idle"] == loop.samples


def test_recorded_resource_tracker_blocked_in_read_is_idle() -> None:
    process = roles("vllm-resource-tracker")
    assert process.role == "idle" and process.engine_thread is None
    assert process.threads[0].role == "idle helper"


def test_recorded_vllm_serving_three_processes() -> None:
    api, core, worker = (
        roles("vllm-apiserver-serving"),
        roles("vllm-enginecore-serving"),
        roles("vllm-worker-serving"),
    )
    # The API server: its uvloop MainThread is the API, everything else waits for work; no engine thread there.
    assert api.role == "api" and api.engine_thread is None
    assert all(thread.role == "idle helper" for thread in api.threads if thread.name != "MainThread")
    # EngineCore: the busy loop is the engine thread, its waits are on the Worker; the socket threads are idle helpers.
    engine = core.thread(core.engine_thread)
    assert engine is not None and engine.name == "MainThread" and engine.role == "engine loop"
    assert engine.waits["worker"] > 0.5 * engine.samples and engine.waits["lock"] == 0
    output = next(thread for thread in core.threads if thread.name == "Thread-2 (process_output_sockets)")
    assert output.role == "idle helper"
    # Worker: the model thread, not the two tqdm monitors (kept apart); vLLM's CPU attention is kernel time.
    model = worker.thread(worker.engine_thread)
    assert model is not None and model.name == "MainThread" and worker.role == "model worker"
    assert len([thread for thread in worker.threads if thread.name == "tqdm_monitor"]) == 2
    assert model.categories["kernel"] > model.categories["interpreter"]
    verdict = foreign_verdict([p.as_dict() for p in (api, core, worker)])
    path = verdict["foreign"]["critical_path"]
    assert path["waiting_on_worker"] > 0.5 and path["worker"]["kernel"] > path["worker"]["interpreter"]
    assert verdict["rule"] is not None and verdict["category"] != "lock"


def test_recorded_llama_server_pools_its_decode_threads_and_calls_python_small() -> None:
    process = roles("llama-server-serving")
    assert process.engine == "llama-cpp-python" and len(process.engine_threads) == 2
    assert all(process.thread(tid).role == "engine loop" for tid in process.engine_threads)  # type: ignore[union-attr]
    assert {thread.role for thread in process.threads if thread.thread_id not in process.engine_threads} == {
        "api",
        "idle helper",
    }
    verdict = foreign_verdict([process.as_dict()])
    assert verdict["interpreter_share"] < 0.05 and verdict["category"] == "kernel"
    # Its anyio lock queues requests on the event loop: the verdict says samples cannot see that wait.
    assert any("cannot see them" in reason for reason in verdict["reasons"])


def test_recorded_transformers_serve_generation_thread_not_tqdm() -> None:
    process = roles("transformers-serve-serving")
    engine = process.thread(process.engine_thread)
    assert engine is not None and engine.name == "Thread-3 (_run)" and process.engine == "transformers"
    assert engine.categories["kernel"] > engine.categories["interpreter"] > 0
    assert [thread.role for thread in process.threads if thread.name == "tqdm_monitor"] == ["idle helper"] * 2


def test_recorded_vllm_spin_wait_on_the_worker_is_waiting_not_interpreter() -> None:
    # vLLM's shared-memory queue spins in Python while the Worker runs the model: most samples land in the
    # helpers its spin calls (a timeout check, a memory fence, clock_gettime), not in the spin function itself.
    process = roles("vllm-enginecore-spin")
    engine = process.thread(process.engine_thread)
    assert engine is not None and engine.role == "engine loop"
    assert engine.waits["worker"] > 0.5 * engine.samples
    assert engine.categories["interpreter"] < 0.25 * engine.samples
    helper = _category(
        "EngineCore.step (vllm/v1/engine/core.py:674);FutureWrapper.result (vllm/v1/executor/multiproc_executor.py:98);"
        "MessageQueue.dequeue (vllm/distributed/device_communicators/shm_broadcast.py:971);"
        "_GeneratorContextManager.__enter__ (contextlib.py:137);"
        "MessageQueue.acquire_read (vllm/distributed/device_communicators/shm_broadcast.py:864);"
        "MessageQueue.ReadTimeoutWithWarnings.timeout_ms (vllm/distributed/device_communicators/shm_broadcast.py:90);"
        "clock_gettime (libc.so.6)"
    )
    assert helper == ("waiting", "worker")
    # Python that merely shares the file with a spin is still Python.
    assert (
        _category(
            "EngineCore.step (vllm/v1/engine/core.py:674);"
            "MessageQueue.enqueue (vllm/distributed/device_communicators/shm_broadcast.py:900);"
            "pickle_payload (vllm/distributed/device_communicators/shm_broadcast.py:700)"
        )[0]
        == "interpreter"
    )


def test_recorded_llama_server_threads_taking_turns_are_one_loop_not_half_idle() -> None:
    # Two AnyIO workers run the tokens by turns (106 and 11 busy samples of ~125 instants): summed, the loop
    # would read idle half the time under a load that kept it busy; counted as one loop it is busy ~94%.
    process = roles("llama-server-turns")
    assert len(process.engine_threads) == 2
    verdict = foreign_verdict([process.as_dict()])
    assert "waited for work 52%" not in " ".join(verdict["reasons"])
    breakdown = foreign_breakdown([process.as_dict()], wall_ns=40 * 10**9)
    split = breakdown["methods"]["samples"]
    assert split["categories"]["idle"] < 0.15 and split["categories"]["kernel"] > 0.8
    assert split["samples"] == pytest.approx(
        max(t.samples for t in process.threads if t.thread_id in process.engine_threads)
    )
    assert verdict["interpreter_share"] < 0.05 and verdict["category"] == "kernel"


def test_a_busy_loop_and_a_late_first_token_say_requests_queued() -> None:
    from infer_prof.profiler.analysis.foreign import queueing_reason

    verdict = {"foreign": {"loop": {"idle": 0.08}}}
    line = queueing_reason(verdict, {"ttft_ms": {"p50": 8497.0}, "tpot_ms": {"p50": 13.76}})
    assert line is not None and "queued behind one another" in line and "busy 92%" in line and "618x" in line
    # A loop waiting for work, or a first token a few tokens late, is no queue.
    assert (
        queueing_reason(
            {"foreign": {"loop": {"idle": 0.6}}}, {"ttft_ms": {"p50": 8497.0}, "tpot_ms": {"p50": 13.76}}
        )
        is None
    )
    assert queueing_reason(verdict, {"ttft_ms": {"p50": 60.0}, "tpot_ms": {"p50": 13.76}}) is None
    assert queueing_reason(verdict, {"ttft_ms": {"p50": None}, "tpot_ms": {"p50": 13.76}}) is None


def test_a_stdlib_http_handler_in_its_token_queue_is_the_api_not_the_engine_loop() -> None:
    # A generation thread that never idles beside handler threads caught in their requests' token queues
    # (queue.py, which the component rules read as an engine loop's queue): the handlers are the API, and the
    # generator is the engine's thread (tests/profiler/fixtures/fake_engine_server.py's shape).
    handler = (
        "thread ({tid}): Thread-{n};_bootstrap (threading.py:1002);run (threading.py:982);"
        "process_request_thread (socketserver.py:691);finish_request (socketserver.py:361);"
        "__init__ (socketserver.py:755);handle (http/server.py:436);handle_one_request (http/server.py:424);"
        "do_POST (fake_engine_server.py:50);get (queue.py:171);_put (queue.py:213) 40\n"
        "thread ({tid}): Thread-{n};_bootstrap (threading.py:1002);run (threading.py:982);"
        "process_request_thread (socketserver.py:691);finish_request (socketserver.py:361);"
        "__init__ (socketserver.py:755);handle (http/server.py:436);handle_one_request (http/server.py:424);"
        "do_POST (fake_engine_server.py:55);dumps (json/__init__.py:231) 5"
    )
    generator = (
        "thread (7): generator;_bootstrap (threading.py:1002);run (threading.py:982);"
        "generation_loop (fake_engine_server.py:24);at::native::addmm_out (libtorch_cpu.so) 90"
    )
    process = process_roles(
        parse_raw("\n".join([generator, handler.format(tid=8, n=1), handler.format(tid=9, n=2)]))
    )
    assert process.engine_thread == 7
    assert [thread.role for thread in process.threads if thread.thread_id in (8, 9)] == ["api", "api"]
