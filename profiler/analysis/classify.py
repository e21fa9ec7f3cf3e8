"""Classify one py-spy stack by what its innermost frames are doing (category) and whose code it is in (component).

py-spy's raw format (seen with py-spy 0.4.3 here) is one line per distinct stack, outermost frame
first, then a space and the sample count:

    thread (8956): infer-prof-engine;Thread.run (threading.py:982);engine_loop (work.py:14);
    torch::autograd::THPVariable_softmax (libtorch_python.so);at::_ops::softmax_int::call (libtorch_cpu.so);
    ...;at::native::(anonymous namespace)::softmax_lastdim_kernel_impl (libtorch_cpu.so);
    0x7fa4e5a1ca9d (libgomp.so.1) 3

Python frames are `qualname (file:line)`; with --native, native frames are `symbol (library)` or an
unresolved `0xADDR (library)` (libc and libgomp are stripped here, so futex waits show as libc
addresses under PyThread_acquire_lock_timed, OpenMP work as libgomp addresses). `thread (TID): NAME`
comes first with --threads; TID is the OS thread id (threading.get_native_id()).

Category rules, innermost frame first:
  1. a GC collection anywhere between the innermost frame and the nearest Python frame -> allocation
  2. walking outward, the first decisive frame decides:
       Python frame: a threading/queue wait or a lock object's C method -> lock, a selector's select (an idle event loop) -> idle,
         else interpreter (the eval loop running it)
       native frame in an OpenMP/BLAS/oneDNN/CUDA library, or at::native/mkl/gemm/omp/dnnl names -> kernel
       malloc/free/PyObject_Malloc/_PyObject_GC_*/mmap/*_dealloc/c10 allocator -> allocation
       futex/pthread_cond_wait/sem_wait/take_gil/PyThread_acquire_lock -> lock
       sleep/select/poll/epoll -> idle (waiting on time or I/O, not on other code)
       THPVariable_*, torch::autograd python bindings, c10::Dispatcher, at::_ops, argument parsing,
         tensor creation -> interpreter with dispatch=True (the control side of a torch call)
       the project's native twins (library name containing "_native") -> other (native control code)
       libpython -> interpreter; libtorch_python/libc10/libtorch_cpu with other names -> dispatch
       unresolved libc/unknown frames are transparent: the caller decides
  3. lock whose innermost Python caller outside threading/queue is an idle marker (a name or qualname in
     `idle_marker`, by default the engine's Engine._run and `_wait_for_work`) -> idle; one that is a
     waiting marker (`waiting_marker`: a client waiting for its next token or result, the load generator
     waiting for the next arrival or for its clients) -> waiting: waiting for the engine, not contention
A lock wait is a lock wait whichever file takes the lock: threading/queue frames called from anywhere,
a lock object's C method (`<built-in method acquire>`, `lock.acquire`) and, with --native, the C-level
waits under them (PyThread_acquire_lock_timed, pthread_mutex_lock, futex). Without --native a bare
`lock.acquire()` / `with lock:` shows only its caller's Python frame, so it reads as interpreter there:
C-level lock waits need native stacks (--profile deep).
  4. nothing decisive -> other
  5. anywhere under one of the profiler's own pauses (`own_marker`: starting and stopping a
     torch.profiler window between steps) -> other, as the spans method counts that time
Without --native every innermost frame is a Python frame, so "interpreter" then means "this Python
line, or native code it called": the breakdown treats such samples as unresolved between the two.

Components come from the innermost Python frame whose file/function matches COMPONENT_RULES (our
engine's modules, vLLM's, SGLang's and llama-cpp-python's, and the HTTP stack as `api`); model frames
become model_kernels when the category is kernel, else model_glue.

A GIL wait (is_gil_wait) is a lock sample whose wait is the interpreter's own: take_gil and the calls
that take the GIL back after native code (PyEval_RestoreThread, PyGILState_Ensure, pybind11's
gil_scoped_acquire), or a condition-variable wait right under the eval loop or a torch binding
(THPVariable_*) with no lock object of Python's in between: 3.11 inlines take_gil, and py-spy drops the
PyEval_RestoreThread frame of a binding retaking the GIL as its op returns (seen under a contended GIL).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from .engine_tables import (
    GENERIC,
    LLAMA_CPP,
    SGLANG,
    TRANSFORMERS,
    VLLM,
    EngineTable,
    all_tables,
)

# Functions whose own waits mean "no work": the engine's loop waits on its Condition directly in
# Engine._run (engine/engine.py); `_wait_for_work` is the conventional name for a factored-out wait.
IDLE_MARKER: tuple[str, ...] = ("_wait_for_work", "Engine._run")
# Functions whose waits are a client waiting for the engine (its next token, its result) or a load
# generator waiting for the next arrival: `waiting`, not lock contention. "FILE:NAME" ties a name to a file.
WAITING_MARKER: tuple[str, ...] = (
    "RequestHandle.result",
    "RequestHandle.stream",
    "Ticket.wait",
    "_Load.pause_until",
    "_Load.join",
    "scenarios/loadgen.py:client",
)
# Functions whose callees are the profiler's own work, not the engine's (profiler.collectors.kernels).
OWN_MARKER: tuple[str, ...] = ("KernelCollector._open_window", "KernelCollector._close_window")


class Frame(NamedTuple):
    """One frame: `function` is a Python qualname or a native symbol; `where` the file or library."""

    function: str
    where: str
    python: bool

    @property
    def unresolved(self) -> bool:
        return not self.python and self.function.startswith("0x")


@dataclass(frozen=True, slots=True)
class Stack:
    """One line of py-spy raw output."""

    thread_id: int | None
    thread_name: str | None
    frames: tuple[Frame, ...]  # outermost first, as py-spy writes them
    count: int

    @property
    def has_native_frames(self) -> bool:
        """Whether py-spy --native unwound C frames into it ("native" alone names the C twins, not these)."""
        return any(not frame.python for frame in self.frames)


class Classification(NamedTuple):
    category: str
    component: str | None
    dispatch: bool
    wait: str | None = (
        None  # for waits, their kind: idle, queueing, worker or client (engine_tables.WAIT_KINDS)
    )


_THREAD = re.compile(r"^thread \((?P<tid>[^)]*)\)(?::\s?(?P<name>.*))?$")


# Files of compiled code: C, C++, CUDA, assembly, Rust, Cython's generated C, intrinsic headers
# (avx512fintrin.h), shared libraries. py-spy prints a native frame with debug info as `name (file:line)`,
# the same shape as a Python frame, so the file decides, never the shape.
_NATIVE_FILE = re.compile(
    r"\.(?:c|cc|cpp|cxx|c\+\+|h|hh|hpp|hxx|h\+\+|inl|inc|ipp|tcc|tpp|cu|cuh|s|asm|rs|pyx|pxd|pxi|f90|m|mm)$"
    r"|\.so(?:\.[\w.]+)?$|\.dylib$|\.dll$|^\?$",
    re.IGNORECASE,
)


def native_file(where: str) -> bool:
    """Whether a frame's file is compiled code (see _NATIVE_FILE), whatever the frame's shape."""
    return bool(_NATIVE_FILE.search(where))


def parse_frame(text: str) -> Frame:
    head, sep, tail = text.rpartition(" (")
    if not sep or not tail.endswith(")"):
        return Frame(text, "", False)
    where = tail[:-1]
    file, colon, line = where.rpartition(":")
    if colon and line.isdigit():
        return Frame(head, file, not native_file(file))
    if where.endswith(".py") or where.startswith("<"):
        return Frame(head, where, True)  # --nolineno output
    return Frame(head, where, False)


def parse_line(line: str) -> Stack | None:
    """Parse one raw line; None for blank or malformed lines."""
    line = line.rstrip("\n")
    stack_text, sep, count_text = line.rpartition(" ")
    if not sep or not count_text.isdigit():
        return None
    parts = stack_text.split(";")
    thread_id: int | None = None
    thread_name: str | None = None
    if parts and parts[0].startswith("process "):
        parts = parts[1:]  # --subprocesses prefix
    if parts:
        match = _THREAD.match(parts[0])
        if match:
            parts = parts[1:]
            tid = match.group("tid")
            thread_id = int(tid, 16) if tid.startswith("0x") else int(tid) if tid.isdigit() else None
            thread_name = match.group("name")
    return Stack(thread_id, thread_name, tuple(parse_frame(part) for part in parts if part), int(count_text))


def parse_raw(text: str | Iterable[str]) -> list[Stack]:
    lines = text.splitlines() if isinstance(text, str) else text
    return [stack for stack in (parse_line(line) for line in lines) if stack is not None]


# ------------------------------------------------------------------------------------------------
# Category rules
# ------------------------------------------------------------------------------------------------

_KERNEL_LIBS = re.compile(
    r"libgomp|libiomp|libomp\b|libmkl|libopenblas|libblas|libdnnl|libmkldnn|libcudnn|libcublas|libcudart|"
    r"libcuda\.|libnvrtc|libtorch_cuda|libsleef|libnccl|libggml|libllama"
)
_KERNEL_NAMES = re.compile(
    r"at::native::|at::vec::|at::internal::|at::cpublas|at::parallel_for|invoke_parallel|for_each|mkl_|MKL|gemm|"
    r"cblas_|\bomp_|__kmp|GOMP_|gomp_|dnnl|mkldnn|ideep|fbgemm|xnnpack|Sleef_|cpu_kernel|cpu_serial_kernel|"
    r"Vectorized|VectorizedLoop|basic_loop|cuda[A-Z]|cu[A-Z][a-z]+Launch"
)
_GC_NAMES = re.compile(r"gc_collect|collect_with_callback|collect_generations")
_ALLOC_NAMES = re.compile(
    r"^(?:__libc_)?(?:malloc|free|calloc|realloc|cfree|posix_memalign|aligned_alloc|memalign)\b|_int_malloc|"
    r"_int_free|operator new|operator delete|PyObject_(?:Malloc|Free|Realloc|Calloc)|_PyObject_(?:Malloc|Free)|"
    r"pymalloc|PyMem_|_PyObject_GC_|PyObject_GC_|_dealloc\b|^(?:__)?(?:mmap|munmap|brk|sbrk|madvise)|"
    r"c10::alloc_cpu|c10::free_cpu|CPUAllocator|CPUCachingAllocator|new_arena"
)
# The GIL's take/drop are inlined into the eval loop here: a GIL wait shows as pthread_cond_timedwait
# right under a Python frame, or under pybind11::gil_scoped_acquire inside torch.
_LOCK_NAMES = re.compile(
    r"futex|__lll_lock_wait|pthread_cond_(?:timed|clock)?wait|pthread_cond_(?:signal|broadcast)|pthread_mutex_lock|"
    r"pthread_rwlock|sem_(?:timed|clock)?wait|take_gil|drop_gil|PyThread_acquire_lock|rlock_acquire|acquire_timed|"
    r"PyCOND_|PyMUTEX_|PyEval_RestoreThread|PyEval_AcquireThread|PyGILState_Ensure|gil_scoped_acquire|"
    r"gil_scoped_release|std::mutex|std::condition_variable|lock_PyThread_acquire_lock|"
    r"_queue_SimpleQueue_get|PyMutex_Lock|_PyMutex_LockTimed|_PySemaphore_Wait|__pthread_mutex_lock|pthread_spin_lock|"
    r"pthread_barrier_wait"
)
_SLEEP_NAMES = re.compile(
    r"time_sleep|pysleep|^(?:__)?(?:clock_)?nanosleep|^(?:__)?p?select\b|^(?:__)?p?poll\b|epoll_p?wait|"
    r"^(?:__)?sched_yield|uv__io_poll|^uv_run$|zmq_poll|zmq::\w*poll|zmq::signaler_t::wait|^(?:__)?(?:recv|accept)\w*$|"
    r"^(?:__libc_)?read$"  # a blocking read of a pipe or socket: waiting on I/O
)
# CPython's own C code, as py-spy names it with debug info (`_PyEval_EvalFrameDefault (ceval.c:5000)`):
# the interpreter at work, like a libpython frame without line numbers.
_CPYTHON_NAMES = re.compile(
    r"^_?Py[A-Z_]|^_?Py\w*_|^(?:cfunction|method|slot|builtin|vectorcall|wrapper)_\w+"
)
_CPYTHON_FILES = re.compile(
    r"(?:^|/)(?:ceval|ceval_gil|ceval_macros|call|abstract|object|typeobject|dictobject|listobject|tupleobject|"
    r"unicodeobject|longobject|floatobject|funcobject|methodobject|descrobject|genobject|frameobject|classobject|"
    r"moduleobject|obmalloc|gcmodule|pystate|pythonrun|import|sysmodule|bltinmodule|context|specialize|errors|"
    r"getargs|modsupport|structmember|bytesobject|sliceobject|setobject|iterobject|frame|pylifecycle|"
    r"_functoolsmodule|_collectionsmodule|itertoolsmodule|_asynciomodule|_pickle|_json|_struct)\.[ch]$|"
    r"generated_cases\.c\.h$|\.c\.h$"
)
# SIMD intrinsics and hand-written compute in compiled extensions (vLLM's CPU attention and GEMMs).
_KERNEL_FILES = re.compile(
    r"intrin\.h$|(?:^|/)(?:cpu_attn|attention|gemm|mla|moe|quant|activation|layernorm|"
    r"pos_encoding|cache|dnnl|sgl)\w*\.(?:hpp|cpp|cc|cu|h)$"
)
_KERNEL_SYMBOLS = re.compile(
    r"^_mm\d*_|__builtin_ia32|^_tile_|^__m\d+|gemm|kernel|attn|attention|matmul|brgemm"
)
# Libraries whose unnamed or generic frames say nothing of the work (the caller decides).
_SYSTEM_LIBS = re.compile(
    r"^(?:libc|libpthread|ld-linux|libdl|librt|libm|libstdc\+\+|libgcc|libutil)[.-]|^linux-vdso"
)
# Strong markers of the path from Python into an aten op: bindings, argument parsing, the dispatcher's
# entry points, tensor creation. Other libtorch frames are weak: the nearest strong frame outward decides.
_DISPATCH_NAMES = re.compile(
    r"THPVariable_|THP[A-Z]|torch::autograd::|torch::PythonArgParser|torch::FunctionSignature|torch::utils::|"
    r"torch::jit::|torch::tensors::|pybind11::|c10::Dispatcher|c10::impl::|c10::OperatorHandle|c10::KernelFunction|"
    r"at::_ops::|at::empty|at::detail::empty|internal_new_from_data|tensor_new|at::RecordFunction"
)
_PY_WAIT_FILES = ("threading.py", "queue.py", "multiprocessing/synchronize.py", "concurrent/futures/_base.py")
_PY_WAIT_FUNCS = frozenset({"wait", "acquire", "_wait_for_tstate_lock", "join", "get", "put", "result"})
# C methods of lock objects as py-spy can name them: `<built-in method acquire ...>`, `lock.acquire`,
# `RLock.acquire`, `SimpleQueue.get`.
_BUILTIN_WAIT = re.compile(
    r"<built-in method (?:acquire|acquire_lock|wait)\b|^(?:_thread\.)?(?:lock|RLock|LockType)\.acquire$|"
    r"^(?:_queue\.)?SimpleQueue\.get$"
)
_TORCH_LIBS = ("libtorch_python", "libc10", "libtorch_cpu", "libtorch.so", "libshm")


def base_symbol(name: str) -> str:
    """A C++ symbol without its template arguments, which name unrelated functions (e.g. the kernel a
    dispatcher wrapper forwards to)."""
    if "<" not in name:
        return name
    out = []
    depth = 0
    for char in name:
        if char == "<":
            depth += 1
        elif char == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


def _leaf_name(qualname: str) -> str:
    return qualname.rpartition(".")[2]


def _python_io_wait(frame: Frame) -> bool:
    """An event loop blocked in its selector (asyncio, uvicorn): waiting on I/O, as epoll_wait is natively."""
    return frame.where.endswith("selectors.py") and _leaf_name(frame.function) in ("select", "poll")


def _python_wait(frame: Frame) -> bool:
    """A Python-level wait on a lock, condition, event, semaphore or queue, whichever file called it.

    The frame is the lock object's own (threading.py, queue.py, ...), or a C method of one as py-spy names
    it (`<built-in method acquire>`, `lock.acquire`): the caller's file does not matter."""
    if frame.where.endswith(_PY_WAIT_FILES) and _leaf_name(frame.function) in _PY_WAIT_FUNCS:
        return True
    return bool(_BUILTIN_WAIT.search(frame.function))


Verdict = tuple[str, bool, bool]  # (category, dispatch, strong)


def _native_verdict(frame: Frame, native_libs: tuple[str, ...]) -> Verdict | None:
    """What one native frame says; None when it says nothing (libc helpers, unknown libraries)."""
    lib = frame.where
    if _KERNEL_LIBS.search(lib):
        return "kernel", False, True
    if any(marker in lib for marker in native_libs):
        return "other", False, True
    if frame.unresolved:
        # Stripped code inside libtorch_cpu is mostly inlined kernel loops; libc addresses say nothing.
        # An address in no library at all ("?") is code generated at run time: oneDNN's JIT GEMM and
        # eltwise kernels (torch's mkldnn linear), a large part of a decode step's samples (docs/measurements.md).
        return ("kernel", False, False) if ("libtorch_cpu" in lib or lib in ("?", "")) else None
    name = base_symbol(frame.function)
    if _ALLOC_NAMES.search(name):
        return "allocation", False, True
    if _LOCK_NAMES.search(name):
        return "lock", False, True
    if _SLEEP_NAMES.search(name):
        return "idle", False, True
    if _KERNEL_NAMES.search(name):
        return "kernel", False, True
    if _DISPATCH_NAMES.search(name):
        return "interpreter", True, True
    if (
        "libpython" in lib
        or lib.startswith("python")
        or _CPYTHON_FILES.search(lib)
        or _CPYTHON_NAMES.search(name)
    ):
        return "interpreter", False, False
    if lib.startswith(_TORCH_LIBS):
        return "interpreter", True, False
    if _KERNEL_FILES.search(lib) or _KERNEL_SYMBOLS.search(name):
        return "kernel", False, True
    if name.startswith("__pyx_"):
        return "other", False, False  # Cython's generated C (uvloop, zmq): native control code
    if native_file(lib) and not _SYSTEM_LIBS.search(lib):
        # Named code in a compiled extension (a .cpp with debug info, a Rust or C library): native work,
        # not the interpreter, though we cannot say which kind; a strong frame outward still decides.
        return "other", False, False
    return None


def _markers(idle_marker: str | tuple[str, ...]) -> tuple[str, ...]:
    return (idle_marker,) if isinstance(idle_marker, str) else tuple(idle_marker)


def _marked(frame: Frame, markers: tuple[str, ...]) -> bool:
    """A marker names the frame's qualname or its last part, optionally as "FILE:NAME" (FILE ends the path)."""
    for marker in markers:
        where, colon, name = marker.rpartition(":")
        if colon and not frame.where.endswith(where):
            continue
        if frame.function == name or _leaf_name(frame.function) == name:
            return True
    return False


def _idle_wait(frames: tuple[Frame, ...], markers: tuple[str, ...]) -> bool:
    """The wait was called directly by a marker function (not by code the marker function called)."""
    for frame in reversed(frames):
        if not frame.python or frame.where.endswith(_PY_WAIT_FILES):
            continue
        return _marked(frame, markers)
    return False


def _compile(
    rows: Iterable[tuple[str, str, str | None]],
) -> list[tuple[str, re.Pattern[str], re.Pattern[str] | None]]:
    return [(label, re.compile(file), re.compile(func) if func else None) for label, file, func in rows]


def _match(rules: list[tuple[str, re.Pattern[str], re.Pattern[str] | None]], frame: Frame) -> str | None:
    for label, file_re, func_re in rules:
        if file_re.search(frame.where) and (func_re is None or func_re.search(frame.function)):
            return label
    return None


class WaitRules:
    """The engine tables' `waits` and `wait_frames` rows (profiler.analysis.engine_tables), compiled."""

    def __init__(self, tables: Iterable[EngineTable] | None = None) -> None:
        tables = all_tables() if tables is None else tuple(tables)
        self._waits = _compile(row for table in tables for row in table.waits)
        self._frames = _compile(row for table in tables for row in table.wait_frames)

    def spin(self, frames: tuple[Frame, ...]) -> tuple[str | None, int]:
        """(default kind, index) of the innermost spin-wait or poll function (a `wait_frames` row), reached from
        the innermost frame through natives, plumbing and the helpers it calls in its own file (a timeout
        check, a memory fence: vLLM's shared-memory queue spends most of its spin in those); (None, -1) if none."""
        helper_file = None
        for index in range(len(frames) - 1, -1, -1):
            frame = frames[index]
            if not frame.python or frame.where.endswith(_WAIT_PLUMBING):
                continue
            kind = _match(self._frames, frame)
            if kind is not None:
                return (kind, index) if helper_file in (None, frame.where) else (None, -1)
            if helper_file is not None and frame.where != helper_file:
                break
            helper_file = frame.where
        return None, -1

    def kind(self, frames: tuple[Frame, ...]) -> tuple[str | None, Frame | None]:
        """(wait kind, the caller that decided it) from the nearest Python caller that is not wait machinery."""
        for frame in reversed(frames):
            if (
                not frame.python
                or frame.where.endswith(_PY_WAIT_FILES)
                or frame.where.endswith(_WAIT_PLUMBING)
            ):
                continue
            if _BUILTIN_WAIT.search(frame.function):
                continue
            kind = _match(self._waits, frame)
            if kind is None and _match(self._frames, frame):
                continue  # wait machinery (a spin-wait, a poll): its caller says what the wait is for
            if kind is None and _thread_loop_takes_a_job(frames, frame):
                kind = "idle"
            return kind, frame
        return None, None


def _thread_loop_takes_a_job(frames: tuple[Frame, ...], caller: Frame) -> bool:
    """A queue get called by the thread's own target (the frame right under threading's Thread.run): a worker
    loop waiting for its next job, whatever engine it belongs to (`while True: job = jobs.get()`)."""
    takes = any(
        frame.python
        and (
            frame.where.endswith("queue.py")
            and _leaf_name(frame.function) == "get"
            or frame.function in ("SimpleQueue.get", "_queue.SimpleQueue.get")
        )
        for frame in frames
    )
    if not takes:
        return False
    python = [frame for frame in frames if frame.python]
    index = python.index(caller) if caller in python else -1
    return (
        index > 0
        and python[index - 1].where.endswith("threading.py")
        and python[index - 1].function == "Thread.run"
    )


# Files between a wait and the code it waits for that say nothing of why (a `with` around the wait, a selector).
_WAIT_PLUMBING = ("selectors.py", "contextlib.py")

_WAIT_CATEGORY = {"idle": "idle", "queueing": "waiting", "worker": "waiting", "client": "waiting"}


def classify_category(
    frames: tuple[Frame, ...],
    *,
    idle_marker: str | tuple[str, ...] = IDLE_MARKER,
    native_libs: tuple[str, ...] = ("_native",),
    waiting_marker: tuple[str, ...] = WAITING_MARKER,
    waits: WaitRules | None = None,
) -> tuple[str, bool]:
    """(category, dispatch) of a stack given outermost-first frames."""
    category, dispatch, _kind = classify_wait(
        frames, idle_marker=idle_marker, native_libs=native_libs, waiting_marker=waiting_marker, waits=waits
    )
    return category, dispatch


def _frame_category(frames: tuple[Frame, ...], native_libs: tuple[str, ...]) -> tuple[str | None, bool]:
    """(category, dispatch) from the stack's frames alone, innermost first, before any wait rule; None: nothing
    decisive."""
    # Rule 1: a GC collection in the innermost native run is allocation, whatever it is freeing.
    for frame in reversed(frames):
        if frame.python:
            break
        if _GC_NAMES.search(frame.function):
            return "allocation", False
    weak: Verdict | None = None
    for frame in reversed(frames):
        if frame.python:
            if weak is not None:
                return weak[0], weak[1]
            return "lock" if _python_wait(frame) else "idle" if _python_io_wait(
                frame
            ) else "interpreter", False
        verdict = _native_verdict(frame, native_libs)
        if verdict is None:
            continue
        if verdict[2]:
            return verdict[0], verdict[1]
        weak = weak or verdict
    if weak is not None:
        return weak[0], weak[1]
    return None, False


def classify_wait(
    frames: tuple[Frame, ...],
    *,
    idle_marker: str | tuple[str, ...] = IDLE_MARKER,
    native_libs: tuple[str, ...] = ("_native",),
    waiting_marker: tuple[str, ...] = WAITING_MARKER,
    waits: WaitRules | None = None,
) -> tuple[str, bool, str | None]:
    """(category, dispatch, wait kind) of a stack; the kind (engine_tables.WAIT_KINDS) only for waits."""
    category, dispatch = _frame_category(frames, native_libs)
    if category is None:
        return "other", False, None
    if category == "lock" and _idle_wait(frames, _markers(idle_marker)):
        return "idle", False, "idle"
    if category == "lock" and _idle_wait(frames, waiting_marker):
        return "waiting", False, "client"
    if (
        category == "interpreter"
        and not dispatch
        and frames
        and frames[-1].python
        and _marked(frames[-1], waiting_marker)
    ):
        # The load generator's client loop blocks in SimpleQueue.get, a C call a Python-only stack does not
        # show; its own code is a few lines between waits.
        return "waiting", False, "client"
    waits = waits or _default_waits()
    default_kind = None
    if category == "interpreter" and not dispatch:
        # A spin-wait, a poll, or a C-level acquire a Python-only stack cannot see: the table names the function,
        # and its callers (not the helpers it calls) say what the wait is for.
        default_kind, at = waits.spin(frames)
        if default_kind is None:
            return category, dispatch, None
        frames = frames[: at + 1]
    elif category not in ("lock", "idle"):
        return category, dispatch, None
    kind, _caller = waits.kind(frames)
    if kind is None:
        kind = default_kind
    if kind is None:
        return category, dispatch, "idle" if category == "idle" else None
    if category == "lock" and frames and not frames[-1].python and is_gil_wait(frames):
        return category, dispatch, None  # the GIL is contention whoever waits for it
    return _WAIT_CATEGORY[kind], False, kind


# ------------------------------------------------------------------------------------------------
# Component rules: (component, file pattern, function pattern or None), innermost Python frame first.
# ------------------------------------------------------------------------------------------------

ENGINE_RULES: tuple[tuple[str, str, str | None], ...] = (
    ("detokenizer", r"(^|/)engine/tokenizer\.py$", r"^IncrementalDetokenizer\b|detok"),
    ("detokenizer", r"(^|/)engine/detokeniz\w*\.py$", None),
    ("tokenizer", r"(^|/)engine/tokenizer\.py$", None),
    ("tokenizer", r"(^|/)tokenizers/", None),
    ("sampler", r"(^|/)engine/sampler\.py$", None),
    ("sampler", r"(^|/)native_paths/\w*sampler\w*\.py$", None),
    ("scheduler", r"(^|/)engine/scheduler\.py$", None),
    ("scheduler", r"(^|/)native_paths/\w*scheduler\w*\.py$", None),
    ("kv_alloc", r"(^|/)engine/kv_alloc\.py$", None),
    ("kv_alloc", r"(^|/)native_paths/\w*kv_alloc\w*\.py$", None),
    ("prepare", r"(^|/)engine/(prepare|model_runner)\.py$", None),
    ("prepare", r"(^|/)native_paths/\w*prepare\w*\.py$", None),
    ("scheduler", r"(^|/)native_paths/core\.py$", None),  # --native core: the fused call runs in schedule()
    (
        "model",
        r"(^|/)engine/(llama|model)\.py$",
        None,
    ),  # model.py: its name in runs recorded before the rename
    ("queue", r"(^|/)engine/engine\.py$", r"submit|queue|_drain|_take|_wait_for_work|arrival"),
    ("queue", r"(^|/)queue\.py$", None),
    # selftest's planted costs wrap the sampler (profiler.checks.injections): their frames are the sampler's.
    ("sampler", r"(^|/)profiler/checks/injections\.py$", None),
)

# Other engines' modules, for `run --target --pid` against their servers: their tables live in
# profiler.analysis.engine_tables (one per engine, with their waits and roles), and a user's own
# tables are read from INFER_PROF_ENGINE_TABLES or ~/.config/infer-prof/engines (see there).
VLLM_RULES = VLLM.components
SGLANG_RULES = SGLANG.components
LLAMA_CPP_RULES = LLAMA_CPP.components
TRANSFORMERS_RULES = TRANSFORMERS.components
# The HTTP face: infer-prof serve's own code and the ASGI stack under any server (FastAPI, Starlette,
# uvicorn, h11, httptools, anyio, asyncio's loop, pydantic validation, SSE helpers, aiohttp).
API_RULES = GENERIC.components
COMPONENT_RULES: tuple[tuple[str, str, str | None], ...] = (
    ENGINE_RULES + VLLM_RULES + SGLANG_RULES + LLAMA_CPP_RULES + TRANSFORMERS_RULES + API_RULES
)


def table_rules(tables: Iterable[EngineTable] | None = None) -> tuple[tuple[str, str, str | None], ...]:
    """Our engine's rules, then every table's components (the user's first: see engine_tables.all_tables)."""
    tables = all_tables() if tables is None else tuple(tables)
    return ENGINE_RULES + tuple(row for table in tables for row in table.components)


class ComponentRules:
    """Compiled component rules; pass your own table to follow a different engine layout (None: every
    engine table, the user's included)."""

    def __init__(self, rules: Iterable[tuple[str, str, str | None]] | None = None) -> None:
        self._rules = _compile(table_rules() if rules is None else rules)

    def component(self, frames: tuple[Frame, ...]) -> str | None:
        for frame in reversed(frames):
            if not frame.python:
                continue
            found = _match(self._rules, frame)
            if found is not None:
                return found
        return None


@cache
def _default_rules() -> ComponentRules:
    return ComponentRules()


@cache
def _default_waits() -> WaitRules:
    return WaitRules()


def classify(
    stack: Stack | tuple[Frame, ...],
    *,
    idle_marker: str | tuple[str, ...] = IDLE_MARKER,
    rules: ComponentRules | None = None,
    native_libs: tuple[str, ...] = ("_native",),
    own_marker: tuple[str, ...] = OWN_MARKER,
    waiting_marker: tuple[str, ...] = WAITING_MARKER,
    waits: WaitRules | None = None,
) -> Classification:
    """Category, component, dispatch flag and, for a wait, its kind, of one stack."""
    frames = stack.frames if isinstance(stack, Stack) else stack
    rules = rules or _default_rules()
    if any(frame.python and frame.function in own_marker for frame in frames):
        return Classification("other", rules.component(frames), False)
    category, dispatch, wait = classify_wait(
        frames, idle_marker=idle_marker, native_libs=native_libs, waiting_marker=waiting_marker, waits=waits
    )
    component = rules.component(frames)
    if component == "model":
        component = "model_kernels" if category == "kernel" else "model_glue"
    return Classification(category, component, dispatch, wait)


_GIL_NAMES = re.compile(
    r"take_gil|PyEval_RestoreThread|PyEval_AcquireThread|PyGILState_Ensure|gil_scoped_acquire|"
    r"PyEval_AcquireLock"
)
_PY_LOCK_OBJECTS = re.compile(
    r"PyThread_acquire_lock|rlock_acquire|acquire_timed|lock_PyThread|semlock|PyCOND_WAIT_LOCK"
)
_CONDVAR_WAITS = re.compile(r"pthread_cond_(?:timed|clock)?wait|futex|__lll_lock_wait")
# torch's Python bindings: their own frames wait on nothing but the GIL (an op's waits sit in at::/c10 frames below).
_PY_BINDINGS = re.compile(r"^torch::autograd::THP\w+|^THPVariable_|^THPModule_")


def is_gil_wait(frames: tuple[Frame, ...]) -> bool:
    """Whether the innermost native frames of a stack are a thread waiting to take the GIL (see the top).

    With --native, py-spy prints CPython's own C functions as `name (file.c:line)`; those are walked
    through like libc's, so that a wait inside the eval loop reaches the Python frame above it."""
    saw_condvar = False
    for frame in reversed(frames):
        name = base_symbol(frame.function)
        if _GIL_NAMES.search(name):
            return True
        if _PY_LOCK_OBJECTS.search(name):
            return False  # a threading.Lock / Condition / queue wait: a lock, but not the GIL
        if _CONDVAR_WAITS.search(name):
            saw_condvar = True
            continue
        c_source = frame.where.endswith((".c", ".h"))
        if (frame.python and not c_source) or _PY_BINDINGS.search(name):
            return saw_condvar  # a wait right under Python code or a binding with no lock object: the GIL
        if not (c_source or frame.unresolved or "libpython" in frame.where or frame.where.startswith("libc")):
            return False  # other native code (an OpenMP barrier, a kernel, an allocator)
    return False
