"""The frame-pattern table (ours, the HTTP stack, vLLM, SGLang, llama-cpp-python) and GIL-wait detection in native stacks."""

from __future__ import annotations

import pytest

from infer_prof.profiler.analysis.classify import ComponentRules, classify, is_gil_wait, parse_line

RULES = ComponentRules()


@pytest.mark.parametrize(
    ("innermost", "component"),
    [
        ("Handoff.post (profiler/serve/handoff.py:44)", "api"),
        ("RequestResponseCycle.send (uvicorn/protocols/http/h11_impl.py:470)", "api"),
        ("Scheduler.schedule (vllm/v1/core/sched/scheduler.py:210)", "scheduler"),
        ("Scheduler._schedule_default (vllm/core/scheduler.py:1230)", "scheduler"),
        ("KVCacheManager.allocate_slots (vllm/v1/core/kv_cache_manager.py:230)", "kv_alloc"),
        ("Sampler.forward (vllm/v1/sample/sampler.py:50)", "sampler"),
        ("IncrementalDetokenizer.update (vllm/v1/engine/detokenizer.py:90)", "detokenizer"),
        ("OpenAIServingChat.create_chat_completion (vllm/entrypoints/openai/serving_chat.py:120)", "api"),
        ("LlamaForCausalLM.forward (vllm/model_executor/models/llama.py:540)", "model_glue"),
        ("Scheduler.get_next_batch_to_run (sglang/srt/managers/scheduler.py:800)", "scheduler"),
        ("TokenToKVPoolAllocator.alloc (sglang/srt/mem_cache/allocator.py:120)", "kv_alloc"),
        ("Sampler.forward (sglang/srt/layers/sampler.py:60)", "sampler"),
        ("DetokenizerManager.event_loop (sglang/srt/managers/detokenizer_manager.py:100)", "detokenizer"),
        ("TokenizerManager.generate_request (sglang/srt/managers/tokenizer_manager.py:300)", "api"),
        ("Llama.sample (llama_cpp/llama.py:700)", "sampler"),
        ("Llama.eval (llama_cpp/llama.py:640)", "model_glue"),
        ("create_completion (llama_cpp/server/app.py:300)", "api"),
        ("PythonSampler.sample (engine/sampler.py:140)", "sampler"),
    ],
)
def test_each_engines_modules_name_their_component(innermost: str, component: str) -> None:
    stack = parse_line(f"thread (1): t;Thread.run (threading.py:982);{innermost} 1")
    assert stack is not None and classify(stack, rules=RULES).component == component


def test_the_innermost_matching_frame_wins_so_the_engine_under_a_server_is_still_the_engine() -> None:
    stack = parse_line(
        "thread (1): t;create_completion (llama_cpp/server/app.py:300);"
        "Llama.sample (llama_cpp/llama.py:700);json.dumps (json/__init__.py:231) 1"
    )
    assert classify(stack, rules=RULES).component == "sampler"


GIL = "pthread_cond_timedwait@@GLIBC_2.3.2 (libc.so.6);__futex_abstimed_wait_common (libc.so.6)"


@pytest.mark.parametrize(
    ("frames", "gil"),
    [
        (f"f (a.py:1);_PyEval_EvalFrameDefault (ceval.c:5000);{GIL}", True),  # 3.11 inlines take_gil here
        ("f (a.py:1);take_gil (ceval_gil.h:250);pthread_cond_timedwait (libc.so.6)", True),
        (
            "f (a.py:1);torch::autograd::THPVariable_mul (libtorch_python.so);pybind11::gil_scoped_acquire::"
            "gil_scoped_acquire (libtorch_python.so);PyEval_RestoreThread (ceval.c:1);pthread_cond_timedwait (libc.so.6)",
            True,
        ),
        # py-spy drops PyEval_RestoreThread under a binding retaking the GIL (seen with a lock-hog thread)
        (
            "LlamaModel._rope_table (engine/model.py:1);torch::autograd::THPVariable_to (libtorch_python.so);"
            "pthread_cond_timedwait (libc.so.6);0x7f49e4ca3f16 (libc.so.6)",
            True,
        ),
        (
            "f (a.py:1);torch::autograd::THPVariable_mul (libtorch_python.so);at::_ops::mul::call (libtorch_cpu.so);"
            "pthread_cond_wait (libc.so.6)",
            False,
        ),  # a wait inside the op itself, not the binding's
        (
            "Condition.wait (threading.py:320);lock_PyThread_acquire_lock (_threadmodule.c:1);"
            "PyThread_acquire_lock_timed (thread_pthread.h:3);sem_clockwait (libc.so.6)",
            False,
        ),  # a Python lock
        (
            "f (a.py:1);GOMP_parallel (libgomp.so.1);0x7f00 (libgomp.so.1);futex_wait (libgomp.so.1)",
            False,
        ),  # OpenMP
        (
            "EpollSelector.select (selectors.py:468);select_epoll_poll (selectmodule.c.h:841);epoll_wait (libc.so.6)",
            False,
        ),
        ("f (a.py:1)", False),
    ],
)
def test_gil_waits_are_told_from_other_waits(frames: str, gil: bool) -> None:
    stack = parse_line(f"thread (1): t;{frames} 1")
    assert stack is not None and is_gil_wait(stack.frames) is gil


def test_an_event_loop_waiting_in_its_selector_is_idle_with_or_without_native_frames() -> None:
    python_only = parse_line(
        "thread (1): infer-prof-api;BaseEventLoop.run_forever (asyncio/base_events.py:607);"
        "BaseEventLoop._run_once (asyncio/base_events.py:1884);EpollSelector.select (selectors.py:468) 5"
    )
    native = parse_line(
        "thread (1): infer-prof-api;BaseEventLoop._run_once (asyncio/base_events.py:1884);"
        "EpollSelector.select (selectors.py:468);epoll_wait (libc.so.6) 5"
    )
    busy = parse_line("thread (1): infer-prof-api;Reply.delta_event (profiler/serve/responses.py:60) 5")
    assert classify(python_only, rules=RULES) == ("idle", "api", False, "idle")
    assert classify(native, rules=RULES).category == "idle"
    assert classify(busy, rules=RULES)[:3] == ("interpreter", "api", False)
