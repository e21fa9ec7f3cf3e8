"""Classification of real py-spy stacks (captured here with py-spy 0.4.3 --native --threads --idle)."""

from __future__ import annotations

import pytest

from infer_prof.profiler.analysis.classify import (
    ComponentRules,
    Frame,
    base_symbol,
    classify,
    parse_frame,
    parse_line,
    parse_raw,
)

# Verbatim lines from `py-spy record --native --threads --idle --format raw` runs of small torch scripts
# on this machine: a matmul/softmax loop waiting on a Condition in `_wait_for_work`, a client thread
# sleeping, and two pure-Python threads fighting a tensor-creating thread for the GIL.
REAL = {
    "sgemm": (
        "thread (7888): infer-prof-engine;0x7fa4e67278ec (libc.so.6);0x7fa4e66a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);engine_loop (work.py:13);torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_matmul(_object*, _object*, _object*)> (libtorch_python.so);torch::autograd::THPVariable_matmul (libtorch_python.so);at::_ops::matmul::call (libtorch_cpu.so);c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor(at::Tensor const&, at::Tensor const&), &at::(anonymous namespace)::(anonymous namespace)::wrapper_CompositeImplicitAutograd__matmul(at::Tensor const&, at::Tensor const&)>, at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&> >, at::Tensor(at::Tensor const&, at::Tensor const&)>::call (libtorch_cpu.so);at::native::matmul (libtorch_cpu.so);at::native::_matmul_impl (libtorch_cpu.so);at::_ops::mm::call (libtorch_cpu.so);c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&), &torch::autograd::VariableType::(anonymous namespace)::mm(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)>, at::Tensor, c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor const&, at::Tensor const&> >, at::Tensor(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)>::call (libtorch_cpu.so);torch::autograd::VariableType::(anonymous namespace)::mm (libtorch_cpu.so);at::_ops::mm::redispatch (libtorch_cpu.so);c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor(at::Tensor const&, at::Tensor const&), &at::(anonymous namespace)::wrapper_CPU_mm(at::Tensor const&, at::Tensor const&)>, at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&> >, at::Tensor(at::Tensor const&, at::Tensor const&)>::call (libtorch_cpu.so);at::native::structured_mm_out_cpu::impl (libtorch_cpu.so);at::native::addmm_impl_cpu_ (libtorch_cpu.so);at::native::cpublas::gemm (libtorch_cpu.so);sgemm_ (libtorch_cpu.so);mkl_blas_sgemm (libtorch_cpu.so);mkl_blas_sgemm_omp_driver_v1 (libtorch_cpu.so);0x7fa4e5a1ca9d (libgomp.so.1);0x7fa4e5a1e02a (libgomp.so.1) 9"
    ),
    "softmax": (
        "thread (7888): infer-prof-engine;0x7fa4e67278ec (libc.so.6);0x7fa4e66a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);engine_loop (work.py:14);torch::autograd::THPVariable_softmax (libtorch_python.so);at::_ops::softmax_int::call (libtorch_cpu.so);c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor(at::Tensor const&, long, std::optional<c10::ScalarType>), &at::(anonymous namespace)::(anonymous namespace)::wrapper_CompositeImplicitAutograd_int_softmax(at::Tensor const&, long, std::optional<c10::ScalarType>)>, at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, long, std::optional<c10::ScalarType> > >, at::Tensor(at::Tensor const&, long, std::optional<c10::ScalarType>)>::call (libtorch_cpu.so);at::native::softmax (libtorch_cpu.so);at::_ops::_softmax::call (libtorch_cpu.so);c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor(c10::DispatchKeySet, at::Tensor const&, long, bool), &torch::autograd::VariableType::(anonymous namespace)::_softmax(c10::DispatchKeySet, at::Tensor const&, long, bool)>, at::Tensor, c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor const&, long, bool> >, at::Tensor(c10::DispatchKeySet, at::Tensor const&, long, bool)>::call (libtorch_cpu.so);torch::autograd::VariableType::(anonymous namespace)::_softmax (libtorch_cpu.so);at::_ops::_softmax::redispatch (libtorch_cpu.so);c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor(at::Tensor const&, long, bool), &at::(anonymous namespace)::wrapper_CPU__softmax(at::Tensor const&, long, bool)>, at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, long, bool> >, at::Tensor(at::Tensor const&, long, bool)>::call (libtorch_cpu.so);at::native::structured_softmax_cpu_out::impl (libtorch_cpu.so);at::native::(anonymous namespace)::softmax_lastdim_kernel_impl (libtorch_cpu.so);0x7fa4e5a1ca9d (libgomp.so.1);0x7fa4e5a1e02a (libgomp.so.1) 3"
    ),
    "condition_wait": (
        "thread (7888): infer-prof-engine;0x7fa4e67278ec (libc.so.6);0x7fa4e66a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);engine_loop (work.py:11);_wait_for_work (work.py:6);Condition.wait (threading.py:331);lock_PyThread_acquire_lock (libpython3.11.so.1.0);PyThread_acquire_lock_timed (libpython3.11.so.1.0);0x7fa4e66ae116 (libc.so.6);0x7fa4e66a3f16 (libc.so.6) 31"
    ),
    "with_lock": (
        "thread (7888): infer-prof-engine;0x7fa4e67278ec (libc.so.6);0x7fa4e66a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);engine_loop (work.py:17);lock_PyThread_acquire_lock (libpython3.11.so.1.0);PyThread_acquire_lock_timed (libpython3.11.so.1.0);0x7fa4e66aed90 (libc.so.6);0x7fa4e66a3f16 (libc.so.6) 5"
    ),
    "sleep": (
        "thread (7889): client-0;0x7fa4e67278ec (libc.so.6);0x7fa4e66a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);client (work.py:24);time_sleep (libpython3.11.so.1.0);clock_nanosleep (libc.so.6) 55"
    ),
    "gc": (
        "thread (7555): MainThread;0x7fa4e664524a (libc.so.6);gc_collect_main (libpython3.11.so.1.0);unicode_dealloc (libpython3.11.so.1.0) 1"
    ),
    "gil_reacquire": (
        "thread (31880): infer-prof-engine;0x7fe82f3278ec (libc.so.6);0x7fe82f2a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);torch_small (gil.py:11);torch::autograd::THPVariable_tensor (libtorch_python.so);torch::utils::tensor_ctor (libtorch_python.so);torch::utils::(anonymous namespace)::internal_new_from_data (libtorch_python.so);pybind11::gil_scoped_release::~gil_scoped_release (libtorch_python.so);pthread_cond_timedwait (libc.so.6);0x7fe82f2a3f16 (libc.so.6) 6"
    ),
    "tensor_creation": (
        "thread (31880): infer-prof-engine;0x7fe82f3278ec (libc.so.6);0x7fe82f2a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);torch_small (gil.py:10);torch::autograd::THPVariable_empty (libtorch_python.so);torch::tensors::get_default_device (libtorch_python.so) 1"
    ),
    "add_kernel_loop": (
        "thread (31880): infer-prof-engine;0x7fe82f3278ec (libc.so.6);0x7fe82f2a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);torch_small (gil.py:12);torch::autograd::THPVariable_add_ (libtorch_python.so);at::_ops::add__Tensor::call (libtorch_cpu.so);torch::autograd::VariableType::(anonymous namespace)::add__Tensor (libtorch_cpu.so);c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor& (c10::DispatchKeySet, at::Tensor&, at::Tensor const&, c10::Scalar const&), &torch::ADInplaceOrView::(anonymous namespace)::add__Tensor(c10::DispatchKeySet, at::Tensor&, at::Tensor const&, c10::Scalar const&)>, at::Tensor&, c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor&, at::Tensor const&, c10::Scalar const&> >, at::Tensor& (c10::DispatchKeySet, at::Tensor&, at::Tensor const&, c10::Scalar const&)>::call (libtorch_cpu.so);at::(anonymous namespace)::wrapper_CPU_add__Tensor (libtorch_cpu.so);at::native::(anonymous namespace)::add_kernel (libtorch_cpu.so);at::native::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator() const (libtorch_cpu.so);at::TensorIteratorBase::for_each (libtorch_cpu.so);GOMP_parallel (libgomp.so.1);at::internal::invoke_parallel<at::parallel_for<at::TensorIteratorBase::for_each(c10::function_ref<void (char**, long const*, long, long)>, long)::{lambda(long, long)#1}>(long, long, long, at::TensorIteratorBase::for_each(c10::function_ref<void (char**, long const*, long, long)>, long)::{lambda(long, long)#1} const&)::{lambda(long, long)#1}> (libtorch_cpu.so);at::TensorIteratorBase::serial_for_each (libtorch_cpu.so);c10::function_ref<void (char**, long const*, long, long)>::callback_fn<at::native::AVX2::VectorizedLoop2d<at::native::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float, float)#1}, at::native::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(at::vec::AVX2::Vectorized<float>, at::vec::AVX2::Vectorized<float>)#1}> > (libtorch_cpu.so) 2"
    ),
    "gil_python": (
        "thread (31878): a;0x7fe82f3278ec (libc.so.6);0x7fe82f2a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);py_busy (gil.py:5);py_busy.<locals>.<listcomp> (gil.py:5);pthread_cond_timedwait (libc.so.6);0x7fe82f2a9753 (libc.so.6);0x7fe82f2a412b (libc.so.6) 2"
    ),
    "realloc": (
        "thread (31878): a;0x7fe82f3278ec (libc.so.6);0x7fe82f2a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);py_busy (gil.py:5);py_busy.<locals>.<listcomp> (gil.py:5);realloc (libc.so.6);0x7fe82f2b63f3 (libc.so.6) 1"
    ),
    "dealloc": (
        "thread (31879): b;0x7fe82f3278ec (libc.so.6);0x7fe82f2a71f5 (libc.so.6);thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);py_busy (gil.py:5);unicode_dealloc (libpython3.11.so.1.0) 3"
    ),
}


ENGINE = "thread (4242): infer-prof-engine;Thread.run (threading.py:982);Engine._loop (engine/engine.py:120)"


def stack(*frames: str, count: int = 1) -> str:
    """A hand-written raw line in py-spy's format, under the engine loop."""
    return ";".join((ENGINE, *frames)) + f" {count}"


def label(line: str, **kwargs):  # type: ignore[no-untyped-def]
    parsed = parse_line(line)
    assert parsed is not None
    return classify(parsed, **kwargs)


# -- parsing -----------------------------------------------------------------------------------------


def test_parse_line_reads_thread_frames_and_count() -> None:
    parsed = parse_line(REAL["sleep"])
    assert parsed is not None
    assert parsed.thread_id == 7889 and parsed.thread_name == "client-0"
    assert parsed.count == 55
    assert parsed.frames[-1] == Frame("clock_nanosleep", "libc.so.6", False)
    assert parsed.frames[-2] == Frame("time_sleep", "libpython3.11.so.1.0", False)
    assert Frame("client", "work.py", True) in parsed.frames
    assert parsed.has_native_frames


def test_parse_frame_handles_cpp_parentheses_addresses_and_no_line_numbers() -> None:
    cpp = parse_frame(
        "at::native::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&) (libtorch_cpu.so)"
    )
    assert cpp == Frame(
        "at::native::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)",
        "libtorch_cpu.so",
        False,
    )
    address = parse_frame("0x7fa4e5a1ca9d (libgomp.so.1)")
    assert address.unresolved and address.where == "libgomp.so.1"
    assert parse_frame("Condition.wait (threading.py:331)") == Frame("Condition.wait", "threading.py", True)
    assert parse_frame("py_busy (gil.py)") == Frame("py_busy", "gil.py", True)  # --nolineno
    assert parse_frame("<module> (<frozen importlib._bootstrap>:1176)").python


def test_parse_line_without_threads_and_malformed_lines() -> None:
    parsed = parse_line("<module> (x.py:1);f (x.py:2) 7")
    assert (
        parsed is not None and parsed.thread_id is None and parsed.count == 7 and not parsed.has_native_frames
    )
    assert parse_line("") is None
    assert parse_line("no count here") is None
    assert len(parse_raw("\n".join(REAL.values()) + "\n\n")) == len(REAL)


def test_base_symbol_drops_template_arguments() -> None:
    wrapper = "c10::impl::wrap_kernel_functor_unboxed_<c10::CompileTimeFunctionPointer<at::Tensor(at::Tensor const&), &at::native::mm>, at::Tensor>::call"
    assert base_symbol(wrapper) == "c10::impl::wrap_kernel_functor_unboxed_::call"
    assert base_symbol("at::native::softmax") == "at::native::softmax"


# -- categories of real stacks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "category", "dispatch"),
    [
        ("sgemm", "kernel", False),  # innermost libgomp address under mkl sgemm
        ("softmax", "kernel", False),
        ("add_kernel_loop", "kernel", False),  # c10::function_ref callback (weak) under serial_for_each
        ("condition_wait", "idle", False),  # Condition.wait inside _wait_for_work
        ("with_lock", "lock", False),  # `with lock:` -> PyThread_acquire_lock_timed -> libc futex
        ("sleep", "idle", False),
        ("gc", "allocation", False),  # unicode_dealloc under gc_collect_main
        ("gil_reacquire", "lock", False),  # pthread_cond_timedwait under gil_scoped_release dtor
        ("gil_python", "lock", False),  # take_gil inlined: pthread_cond_timedwait right under Python
        ("tensor_creation", "interpreter", True),  # THPVariable_empty -> get_default_device
        ("realloc", "allocation", False),
        ("dealloc", "allocation", False),
    ],
)
def test_real_stacks(key: str, category: str, dispatch: bool) -> None:
    result = label(REAL[key])
    assert (result.category, result.dispatch) == (category, dispatch)


def test_idle_marker_is_a_parameter() -> None:
    assert label(REAL["condition_wait"]).category == "idle"
    assert label(REAL["condition_wait"], idle_marker="_next_batch").category == "lock"
    renamed = REAL["condition_wait"].replace("_wait_for_work", "_next_batch")
    assert label(renamed, idle_marker="_next_batch").category == "idle"


def test_the_engines_own_wait_in_engine_run_is_idle_but_its_other_waits_are_not() -> None:
    run = "thread (4242): infer-prof-engine;Thread.run (threading.py:982);Engine._run (engine/engine.py:231)"
    wait = (
        f"{run};Condition.wait (threading.py:331);lock_PyThread_acquire_lock (libpython3.11.so.1.0);"
        "PyThread_acquire_lock_timed (libpython3.11.so.1.0);0x7fa4e66ae116 (libc.so.6) 3"
    )
    assert label(wait).category == "idle"
    gil = (
        f"{run};Engine._step (engine/engine.py:262);Scheduler.schedule (engine/scheduler.py:50);"
        "pthread_cond_timedwait (libc.so.6);0x7fe82f2a3f16 (libc.so.6) 2"
    )
    assert label(gil).category == "lock"
    traced_lock = (
        f"{run};_LockUse.__enter__ (profiler/collectors/spans.py:80);"
        "lock_PyThread_acquire_lock (libpython3.11.so.1.0);0x7fa4e66aed90 (libc.so.6) 1"
    )
    assert label(traced_lock).category == "lock"


def test_the_profilers_own_window_start_and_stop_is_other() -> None:
    run = "thread (4242): infer-prof-engine;Thread.run (threading.py:982);Engine._step (engine/engine.py:283)"
    stop = (
        f"{run};RecordingTracer._end_step (profiler/collectors/spans.py:250);KernelCollector.on_step "
        "(profiler/collectors/kernels.py:337);KernelCollector._close_window (profiler/collectors/kernels.py:380);"
        "profile.__exit__ (torch/profiler/profiler.py:829);torch::autograd::profiler::disableProfiler "
        "(libtorch_cpu.so);malloc (libc.so.6) 2"
    )
    assert label(stop)[:3] == ("other", None, False)
    # The same frames without the window's pause are the engine's own allocation.
    assert (
        label(stop.replace("KernelCollector._close_window", "KernelCollector.summary")).category
        == "allocation"
    )


# -- hand-written stacks in the same format -----------------------------------------------------------


def test_python_leaf_is_interpreter_and_python_waits_are_lock() -> None:
    assert label(stack("Scheduler.schedule (engine/scheduler.py:40)")).category == "interpreter"
    # A queue wait inside the loop's work is a lock wait; one in the thread's own loop waits for its next job.
    assert (
        label(
            stack(
                "Engine._step (engine/engine.py:200)",
                "Queue.get (queue.py:171)",
                "Condition.wait (threading.py:331)",
            )
        ).category
        == "lock"
    )
    job = "thread (9): pool;Thread.run (threading.py:982);serve_jobs (mylib/pool.py:8);Queue.get (queue.py:171);Condition.wait (threading.py:331) 1"
    assert label(job).category == "idle"
    assert (
        label(
            stack("Thread.join (threading.py:1119)", "Thread._wait_for_tstate_lock (threading.py:1139)")
        ).category
        == "lock"
    )


def test_dispatch_frames_are_interpreter_with_dispatch_flag() -> None:
    for leaf in (
        "torch::autograd::THPVariable_softmax (libtorch_python.so)",
        "at::_ops::softmax_int::call (libtorch_cpu.so)",
        "c10::impl::wrap_kernel_functor_unboxed_<c10::CompileTimeFunctionPointer<at::Tensor(at::Tensor const&), &at::native::mm>>::call (libtorch_cpu.so)",
        "torch::PythonArgParser::raw_parse (libtorch_python.so)",
        "c10::Dispatcher::call (libtorch_cpu.so)",
    ):
        result = label(stack("Model.forward (engine/model.py:80)", leaf))
        assert (result.category, result.dispatch, result.component) == ("interpreter", True, "model_glue"), (
            leaf
        )


def test_weak_torch_frames_take_the_nearest_strong_frame_outward() -> None:
    under_kernel = stack(
        "Model.forward (engine/model.py:80)",
        "at::_ops::add::call (libtorch_cpu.so)",
        "at::native::structured_add_out::impl (libtorch_cpu.so)",
        "at::TensorIteratorBase::compute_shape (libtorch_cpu.so)",
    )
    assert label(under_kernel).category == "kernel"
    under_dispatch = stack(
        "Model.forward (engine/model.py:80)",
        "at::_ops::empty_memory_format::call (libtorch_cpu.so)",
        "c10::TensorImpl::TensorImpl (libc10.so)",
    )
    assert (label(under_dispatch).category, label(under_dispatch).dispatch) == ("interpreter", True)
    stripped = stack(
        "Model.forward (engine/model.py:80)",
        "at::native::cpublas::gemm (libtorch_cpu.so)",
        "0x7f0000001000 (libtorch_cpu.so)",
    )
    assert label(stripped).category == "kernel"


def test_allocation_lock_and_interpreter_natives() -> None:
    assert (
        label(stack("f (engine/sampler.py:3)", "_PyObject_GC_New (libpython3.11.so.1.0)")).category
        == "allocation"
    )
    assert (
        label(stack("f (engine/sampler.py:3)", "PyObject_Malloc (libpython3.11.so.1.0)")).category
        == "allocation"
    )
    assert (
        label(
            stack(
                "f (engine/model.py:3)",
                "at::_ops::empty::call (libtorch_cpu.so)",
                "c10::alloc_cpu (libc10.so)",
                "posix_memalign (libc.so.6)",
            )
        ).category
        == "allocation"
    )
    assert label(stack("f (engine/model.py:3)", "take_gil (libpython3.11.so.1.0)")).category == "lock"
    assert (
        label(stack("f (engine/model.py:3)", "__futex_abstimed_wait_common (libc.so.6)")).category == "lock"
    )
    assert (
        label(stack("f (engine/model.py:3)", "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)")).category
        == "interpreter"
    )
    assert (
        label(
            stack("f (engine/model.py:3)", "dict_subscript (libpython3.11.so.1.0)", "0x7f01 (libc.so.6)")
        ).category
        == "interpreter"
    )


def test_nothing_decisive_is_other_and_native_twins_are_other() -> None:
    assert label("thread (1): MainThread;0x7fa4e664524a (libc.so.6) 1").category == "other"
    twin = label(
        stack(
            "NativeScheduler.schedule (native_paths/scheduler.py:30)",
            "ip_schedule (_native_paths.cpython-311-x86_64-linux-gnu.so)",
        )
    )
    assert (twin.category, twin.component) == ("other", "scheduler")


# -- components --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frames", "component"),
    [
        (("Engine._step (engine/engine.py:200)", "Scheduler.schedule (engine/scheduler.py:40)"), "scheduler"),
        (
            (
                "Scheduler.schedule (engine/scheduler.py:40)",
                "PythonKVAllocator.allocate (engine/kv_alloc.py:60)",
            ),
            "kv_alloc",
        ),
        (("Sampler.sample (engine/sampler.py:90)",), "sampler"),
        (("NativeSampler.sample (native_paths/sampler.py:12)",), "sampler"),
        (("NativeAllocator.step (native_paths/kv_alloc.py:12)",), "kv_alloc"),
        (("Tokenizer.encode (engine/tokenizer.py:30)",), "tokenizer"),
        (("IncrementalDetokenizer.step (engine/tokenizer.py:88)",), "detokenizer"),
        (("Engine.submit (engine/engine.py:70)",), "queue"),
        (("Engine._wait_for_work (engine/engine.py:150)", "Condition.wait (threading.py:331)"), "queue"),
        (("Engine._step (engine/engine.py:200)",), None),
        (("Model.forward (engine/model.py:80)",), "model_glue"),
        (("Model.forward (engine/model.py:80)", "mkl_blas_sgemm (libtorch_cpu.so)"), "model_kernels"),
    ],
)
def test_components_from_innermost_python_frame(frames: tuple[str, ...], component: str | None) -> None:
    assert label(stack(*frames)).component == component


def test_component_rules_are_replaceable() -> None:
    rules = ComponentRules([("sampler", r"(^|/)mysampler\.py$", None)])
    assert label(stack("pick (mysampler.py:3)"), rules=rules).component == "sampler"
    assert label(stack("Sampler.sample (engine/sampler.py:90)"), rules=rules).component is None


def test_jit_code_in_no_library_is_kernel_time() -> None:
    # Seen in a real `py-spy --native` run of the engine: oneDNN's JIT kernels live in anonymous memory.
    stack = parse_line(
        "thread (0x1): infer-prof-engine;Engine._step (engine/engine.py:270);"
        "_select_linear.<locals>.fast (engine/model.py:77);OpOverloadPacket.__call__ (torch/_ops.py:1255);"
        "0x7eff93ffe1ec (?) 3"
    )
    assert stack is not None
    assert classify(stack).category == "kernel"


# -- waiting and untraced locks --------------------------------------------------------------------------

CLIENT = "thread (5151): infer-prof-client-3;Thread.run (threading.py:982);_Load.closed_loop.<locals>.client (scenarios/loadgen.py:214);_Load.serve (scenarios/loadgen.py:178);Ticket.wait (profiler/session/drive.py:36)"
WAIT_NATIVE = ";lock_PyThread_acquire_lock (libpython3.11.so.1.0);PyThread_acquire_lock_timed (libpython3.11.so.1.0);0x7fa4e66ae116 (libc.so.6) 7"


def test_a_client_waiting_for_its_tokens_is_waiting_not_lock() -> None:
    result = f"{CLIENT};RequestHandle.result (engine/sequence.py:141);Condition.wait_for (threading.py:373);Condition.wait (threading.py:331)"
    assert label(result + WAIT_NATIVE).category == "waiting"
    assert label(result + " 7").category == "waiting"  # the same wait without native frames
    stream = f"{CLIENT};RequestHandle.stream (engine/sequence.py:156);Condition.wait_for (threading.py:373);Condition.wait (threading.py:331) 2"
    assert label(stream).category == "waiting"
    pacing = "thread (5150): MainThread;_Load.open_loop (scenarios/loadgen.py:250);_Load.pause_until (scenarios/loadgen.py:264);Event.wait (threading.py:629);Condition.wait (threading.py:331) 4"
    assert label(pacing).category == "waiting"
    idle_client = "thread (5152): infer-prof-client-4;Thread.run (threading.py:982);_Load.open_loop.<locals>.client (scenarios/loadgen.py:229) 9"
    assert label(idle_client).category == "waiting"  # blocked in SimpleQueue.get, a C call
    # A client contending for the engine's submit lock is contention, not waiting for its tokens.
    submit = (
        f"{CLIENT};Engine.submit (engine/engine.py:141);_LockUse.__enter__ (profiler/collectors/spans.py:80)"
        + WAIT_NATIVE
    )
    assert label(submit).category == "lock"
    # The markers are a parameter: without them the same wait is a lock wait.
    assert label(result + WAIT_NATIVE, waiting_marker=()).category == "lock"


def test_a_lock_is_a_lock_whichever_file_takes_it() -> None:
    # A component's own `with lock:` (no tracer, no threading.py frame): native frames say it waits.
    untraced = stack("PythonSampler.sample (engine/sampler.py:120)").rsplit(" ", 1)[0] + WAIT_NATIVE
    assert label(untraced)[:3] == ("lock", "sampler", False)
    # A Condition or queue wait called from any file, and a lock object's C method as py-spy names it.
    assert (
        label(stack("Worker.step (mylib/worker.py:9)", "Condition.wait (threading.py:331)")).category
        == "lock"
    )
    assert (
        label(
            stack(
                "Worker.step (mylib/worker.py:9)",
                "<built-in method acquire of _thread.lock object> (<built-in>)",
            )
        ).category
        == "lock"
    )
    assert label(stack("Worker.step (mylib/worker.py:9)", "lock.acquire (<built-in>)")).category == "lock"
    for mutex in ("pthread_mutex_lock (libc.so.6)", "__lll_lock_wait (libc.so.6)", "futex_wait (libc.so.6)"):
        assert (
            label(stack("Worker.step (mylib/worker.py:9)", "my_c_function (libmine.so)", mutex)).category
            == "lock"
        )
    # Without native frames a bare acquire is only its caller's line: interpreter (the docstring says so).
    assert label(stack("PythonSampler.sample (engine/sampler.py:120)")).category == "interpreter"


def test_planted_injections_are_the_sampler() -> None:
    planted = (
        stack("UntracedContendedSampler.sample (profiler/checks/injections.py:90)").rsplit(" ", 1)[0]
        + WAIT_NATIVE
    )
    assert label(planted)[:3] == ("lock", "sampler", False)
