"""Noise-free counters of an engine's control-path work per step and per generated token (a counting mode).

Counting is expensive (a profile hook sees every Python call), so it is its own run mode and never on
in a timed run. Every counter counts events, never time or memory levels, so a seeded run whose
steps see the same batches gives the same values twice:

    python_calls_per_token   Python function calls ('call' profile events, generator resumptions
                             included) on the thread that runs the step, per generated token
    python_calls_per_step    the same per step
    torch_ops_per_step       ATen ops dispatched from that thread (a TorchDispatchMode; ops that run
                             inside another op's kernel are not counted twice)
    allocations_per_step     tensors freshly allocated by those ops (outputs that alias no input:
                             no views, no in-place or out= results); Python object allocations are
                             not counted because CPython offers no deterministic per-thread count
    native_calls_per_step    calls into native adapters (their `calls` counters, or hooks you pass; one
                             adapter passed twice counts once). The twin spec promises one per native
                             component per step: 4 with every C twin (sampler, kv_alloc, scheduler,
                             prepare), 2 with the fused core and the C sampler (the core's allocator
                             and preparation faces make no call of their own and have no counter)
    bytes_copied_per_step    host<->device bytes moved by copy ops (0 on a CPU-only run)

Determinism needs a deterministic workload: the same requests reaching the same steps (submit them
all before stepping, or a closed loop with one client), seeded sampling, and warm-up steps before
start(): from construction until stop() every wrapped step runs with the hooks on, so the warm-up
fills lazy imports, caches and torch's per-op Python objects, and start() then zeroes the counts. Garbage collection is held off inside counted steps
(it runs between them) because a collection can run finalizers and callbacks at arbitrary points.
"""

from __future__ import annotations

import functools
import gc
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")  # the wrapped step's parameters, kept by wrap_step
R = TypeVar("R")  # and its result


class HasCalls(Protocol):
    """A native counter as an object: the number of calls so far in its `calls`."""

    @property
    def calls(self) -> int: ...


NativeCounter = Callable[[], int] | HasCalls  # a zero-argument callable, or an object with an int `calls`


class CounterCollector:
    """Counts deterministic work inside engine steps; wrap the engine's step function with wrap_step()."""

    def __init__(
        self,
        *,
        python_calls: bool = True,
        torch_ops: bool = True,
        native_counters: Iterable[NativeCounter] = (),
        hold_gc: bool = True,
    ) -> None:
        self.count_python = python_calls
        self.count_torch = torch_ops
        self.native_counters = list(native_counters)
        self.hold_gc = hold_gc
        self._hooked = True  # hooks on for warm-up steps too, so that first-time work is not counted later
        self._active = False
        self._reset()

    def _reset(self) -> None:
        self.steps = 0
        self.generated_tokens = 0
        self.python_calls = 0
        self.torch_ops = 0
        self.allocations = 0
        self.bytes_copied = 0
        self.native_calls = 0
        self._native_start: list[int] = []
        self._ignore_depth = 0

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Zero the counts and begin counting the steps that follow."""
        self._reset()
        self.native_counters = list({id(counter): counter for counter in self.native_counters}.values())
        self._native_start = [_read_native(counter) for counter in self.native_counters]
        if self.hold_gc:
            gc.collect()  # start every counted run from the same heap state
        self._hooked = True
        self._active = True

    def stop(self) -> None:
        """Stop counting; native adapter counters are read here, as a difference since start()."""
        self._hooked = False
        if not self._active:
            return
        self._active = False
        self.native_calls = sum(
            _read_native(counter) - begin for counter, begin in zip(self.native_counters, self._native_start)
        )

    def add_tokens(self, count: int) -> None:
        """Tell the collector how many tokens the engine generated (for the per-token counters)."""
        self.generated_tokens += count

    def result(self, *, generated_tokens: int | None = None) -> dict[str, float]:
        """The counters, normalised per step and per generated token, plus the raw steps and tokens."""
        tokens = self.generated_tokens if generated_tokens is None else generated_tokens
        steps = self.steps

        def per(total: int, unit: int) -> float:
            return total / unit if unit else 0.0

        counts: dict[str, float] = {"steps": steps, "generated_tokens": tokens}
        if self.count_python:
            counts["python_calls_per_token"] = per(self.python_calls, tokens)
            counts["python_calls_per_step"] = per(self.python_calls, steps)
        if self.count_torch:
            counts["torch_ops_per_step"] = per(self.torch_ops, steps)
            counts["allocations_per_step"] = per(self.allocations, steps)
            counts["bytes_copied_per_step"] = per(self.bytes_copied, steps)
        counts["native_calls_per_step"] = per(self.native_calls, steps)
        return counts

    # -- counting one step ----------------------------------------------------------------------

    def wrap_step(self, step: Callable[P, R]) -> Callable[P, R]:
        """Return `step` wrapped so each call counts as one step (recorded between start() and stop())."""

        @functools.wraps(step)
        def counted_step(*args: P.args, **kwargs: P.kwargs) -> R:
            if not self._hooked:
                return step(*args, **kwargs)
            state = self._enter()
            try:
                return step(*args, **kwargs)
            finally:
                self._exit(state)

        return counted_step

    def _enter(self) -> tuple[Any, Any, bool]:
        gc_was_enabled = gc.isenabled()
        if self.hold_gc:
            gc.disable()
        mode = _op_counter(self) if self.count_torch else None
        if mode is not None:
            mode.__enter__()
        previous_profile = sys.getprofile()
        if self.count_python:
            self._ignore_depth = 0
            # Installed last so that nothing of the collector's own setup is counted.
            sys.setprofile(self._profile)
        return previous_profile, mode, gc_was_enabled

    def _exit(self, state: tuple[Any, Any, bool]) -> None:
        previous_profile, mode, gc_was_enabled = state
        if self.count_python:
            sys.setprofile(previous_profile)
            self.python_calls -= 1  # the call of _exit itself was counted; it is ours, not the step's
        if mode is not None:
            mode.__exit__(None, None, None)
        if gc_was_enabled:
            gc.enable()
        if self._active:
            self.steps += 1

    def _profile(self, frame: types.FrameType, event: str, arg: object) -> None:
        # Python run by the op-counting mode (and by torch under it) is the counter's, not the engine's.
        if self._ignore_depth:
            if event == "call":
                self._ignore_depth += 1
            elif event == "return":
                self._ignore_depth -= 1
            return
        if event == "call":
            if frame.f_code in _IGNORED_CODES:
                self._ignore_depth = 1
            else:
                self.python_calls += 1

    def _record_op(self, func: Any, args: tuple[Any, ...], out: Any) -> None:
        self.torch_ops += 1
        self.allocations += _fresh_tensors(func, out)
        self.bytes_copied += _host_device_bytes(func, args, out)


def _read_native(counter: NativeCounter) -> int:
    if callable(counter):
        return int(counter())
    return int(counter.calls)


# ---------------------------------------------------------------------------------------------
# torch: imported lazily so that counting Python calls never needs torch.
# ---------------------------------------------------------------------------------------------

# Code objects whose calls (and everything under them) belong to op counting, not to the engine.
_IGNORED_CODES: set[types.CodeType] = set()
_MODE_CLASS: Any = None


def _op_counter(collector: CounterCollector) -> Any:
    global _MODE_CLASS
    if _MODE_CLASS is None:
        try:
            from torch.utils._python_dispatch import TorchDispatchMode
        except ImportError:  # no torch: there are no torch ops to count
            return None

        class OpCounter(TorchDispatchMode):
            def __init__(self, owner: CounterCollector) -> None:
                super().__init__()
                self.owner = owner

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                self.owner._record_op(func, args, out)
                return out

        _MODE_CLASS = OpCounter
        _IGNORED_CODES.add(OpCounter.__torch_dispatch__.__code__)
        try:
            # torch looks up per-mode dispatch rules in Python before calling the mode, once per op.
            from torch._library.simple_registry import find_torch_dispatch_rule

            _IGNORED_CODES.add(find_torch_dispatch_rule.__code__)
        except ImportError:  # older torch: no such lookup
            pass
    return _MODE_CLASS(collector)


def _fresh_tensors(func: Any, out: Any) -> int:
    """Outputs whose schema return aliases no input are new storage."""
    import torch

    schema = getattr(func, "_schema", None)
    returns = list(schema.returns) if schema is not None else []
    outs = out if isinstance(out, (tuple, list)) and len(returns) != 1 else (out,)
    fresh = 0
    for index, value in enumerate(outs):
        aliased = index < len(returns) and returns[index].alias_info is not None
        if aliased:
            continue
        if isinstance(value, torch.Tensor):
            fresh += 1
        elif isinstance(value, (list, tuple)):
            fresh += sum(1 for item in value if isinstance(item, torch.Tensor))
    return fresh


_COPY_OPS = ("aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize")


def _host_device_bytes(func: Any, args: tuple[Any, ...], out: Any) -> int:
    """Bytes of a copy op whose source and destination sit on different devices (host<->device)."""
    import torch

    schema = getattr(func, "_schema", None)
    if schema is None or schema.name not in _COPY_OPS or not args:
        return 0
    if schema.name == "aten::_to_copy":
        source, target = args[0], out
    elif schema.name == "aten::copy_":
        target, source = args[0], args[1] if len(args) > 1 else None
    else:
        source, target = args[0], args[1] if len(args) > 1 else out
    if not isinstance(source, torch.Tensor) or not isinstance(target, torch.Tensor):
        return 0
    if source.device == target.device:
        return 0
    return int(target.numel() * target.element_size())
