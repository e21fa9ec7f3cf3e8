"""infer-prof's C sampler in place of vLLM's CPU top-k/top-p sampling (TopKTopPSampler.forward_cpu), put into a launched server by the probe for `run --launch CMD --probe --swap sampler`."""

# Copied beside sitecustomize.py into the probe's folder, so it imports nothing of infer-prof and, at import,
# only the standard library: torch and the C library are reached only in a process that imports vLLM's sampler
# module, which has torch already. It never raises into its host: a failure leaves vLLM's own function in place
# and says why in swap-<pid>.json.
#
# What it replaces: forward_cpu(self, logits, generators, k, p) -> (tokens, logits_to_return). vLLM has applied
# each row's temperature already (greedy rows of an all-greedy batch never come here); forward_cpu applies top-k
# (apply_top_k_only, or a full sort of the vocabulary when any top-p is set), then top-p, then draws by
# Gumbel-max from one seed a row (torch.randint, or the request's own generator when it is seeded). Here the
# same seeds are drawn the same way (so a seeded request's generator advances as in vLLM, and its tokens repeat
# from run to run), then one call of np_sampler_draw_rows reads the logits, k and p where they lie and writes
# the tokens: top-k, top-p and the draw of docs/twin-spec.md, with the row's seed at position 0. Only the draws
# differ from vLLM's: the distribution each row is drawn from is the same truncated, renormalised softmax.
#
# Handed back to vLLM's own function, whole calls at a time (the settings that decide are the sampler's, not a
# row's): a processed logprobs mode (it returns the filtered logits, which the C path never makes), fp64 Gumbel
# noise, a batch with neither top-k nor top-p (vLLM then only draws, already in C++), logits that are not a
# float32 [rows, vocab] CPU tensor in one piece, anything C refuses (NaN), and any error.
#
# Files, written into the probe's folder by every process that swaps:
#   swap-<pid>.json   {"pid", "version", "swapped", "why", "rows": {path: rows}, "calls": {path: calls}}
#   swap-<pid>.tsv    start_ns, end_ns, rows, path code: one line per call of forward_cpu (perf_counter_ns)

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

NAME = "sampler"  # what `--swap` calls it
MODULE = "vllm.v1.sample.ops.topk_topp_sampler"
CLASS = "TopKTopPSampler"
METHOD = "forward_cpu"
PARAMETERS = ("self", "logits", "generators", "k", "p")
KNOWN_VERSIONS = ("0.32.0",)  # the versions whose forward_cpu this file was written against and tested with
RAW_MODES = (
    "raw_logprobs",
    "raw_logits",
)  # the logprobs modes that take nothing from forward_cpu's filtering
LIBRARY_MODULE = "infer_prof.native_paths._native"
SYMBOL = "np_sampler_draw_rows"
SWAP_ON = ord("S")  # the switch byte of a turn with the swap in (a slowdown's are a..z, the probe's 0 and 1)
TURNS = (ord("1"), SWAP_ON, SWAP_ON, ord("1"))  # ABBA, one step a turn, as the probe's own A/B
FLUSH_NS = 500_000_000
MAX_PENDING = 1_000_000

# The path each call took; the codes are swap-<pid>.tsv's last column.
PATHS = (
    "swapped",  # 0: drawn by the C sampler
    "off turn",  # 1: vLLM's own, in a turn without the swap (the A/B's other arm)
    "processed logprobs",  # 2
    "fp64 gumbel",  # 3
    "no top-k or top-p",  # 4
    "logits layout",  # 5
    "refused by C",  # 6
    "error",  # 7
)
SWAPPED, OFF_TURN, PROCESSED, FP64, NO_FILTER, LAYOUT, REFUSED, ERROR = range(len(PATHS))
_LINE = "%d\t%d\t%d\t%d\n"


def problem(version: str | None, parameters: tuple[str, ...] | None) -> str | None:
    """Why the swap refuses this vLLM (one line), or None when it knows it."""
    if version is None:
        return "vLLM is not installed in the server's Python"
    if version not in KNOWN_VERSIONS:
        return f"vLLM {version} is not one the sampler swap knows ({', '.join(KNOWN_VERSIONS)}): its {CLASS}.{METHOD} may differ"
    if parameters is None:
        return f"vLLM {version} has no {MODULE}.{CLASS}.{METHOD}"
    if tuple(parameters) != PARAMETERS:
        return f"vLLM {version}'s {CLASS}.{METHOD}{tuple(parameters)} does not take {PARAMETERS}"
    return None


def installed() -> dict[str, Any]:
    """This Python's vLLM version and forward_cpu's parameters, read from its files without importing vLLM
    (no torch: a second at most), for the host's check before the server starts."""
    import ast
    import importlib.util

    version = parameters = None
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.submodule_search_locations:
        root = list(spec.submodule_search_locations)[0]
        version = _assigned(ast, os.path.join(root, "_version.py"), "__version__")
        path = os.path.join(root, *MODULE.split(".")[1:]) + ".py"
        for node in _tree(ast, path):
            if isinstance(node, ast.ClassDef) and node.name == CLASS:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == METHOD:
                        parameters = tuple(arg.arg for arg in item.args.posonlyargs + item.args.args)
    return {"version": version, "parameters": parameters, "problem": problem(version, parameters)}


def _tree(ast: Any, path: str) -> list[Any]:
    if not os.path.isfile(path):
        return []
    with open(path, "rb") as handle:
        return list(ast.parse(handle.read()).body)


def _assigned(ast: Any, path: str, name: str) -> str | None:
    """The string a module's top level assigns to `name` (vLLM's _version.py: __version__ = version = '...')."""
    for node in _tree(ast, path):
        if isinstance(node, ast.Assign) and any(
            getattr(target, "id", None) == name for target in node.targets
        ):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return "unknown"


def load_library(path: str) -> tuple[Any, Any]:
    """(ffi, lib) of infer-prof's built extension at `path` (any Python with cffi loads it)."""
    import importlib.machinery
    import importlib.util

    loaded = sys.modules.get(LIBRARY_MODULE)  # infer-prof's own process (its tests) has it already
    if loaded is not None and os.path.realpath(str(getattr(loaded, "__file__", ""))) == os.path.realpath(
        path
    ):
        return loaded.ffi, loaded.lib
    loader = importlib.machinery.ExtensionFileLoader(LIBRARY_MODULE, path)
    spec = importlib.util.spec_from_file_location(LIBRARY_MODULE, path, loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    if not hasattr(module.lib, SYMBOL):
        raise ImportError(f"{path} has no {SYMBOL}: rebuild it (python native_paths/build.py)")
    return module.ffi, module.lib


class Drawer:
    """The C side of one swapped call: seeds as vLLM draws them, then one np_sampler_draw_rows over the batch."""

    def __init__(self, ffi: Any, lib: Any) -> None:
        import torch

        self.torch = torch
        self.ffi = ffi
        self.lib = lib
        self.sampler = lib.np_sampler_create()
        if self.sampler == ffi.NULL:
            raise MemoryError("cannot allocate the native sampler")
        self.bad = ffi.new("int64_t *")
        self.lock = threading.Lock()  # the sampler's scratch is one per Drawer

    def __call__(self, logits: Any, generators: dict[int, Any], k: Any, p: Any) -> Any:
        """int64 tokens [rows], or None when C refuses the batch (NaN logits, a top-p outside (0, 1])."""
        torch, ffi = self.torch, self.ffi
        rows, vocab = logits.shape
        seeds = torch.randint(0, 2**31, (rows,), dtype=torch.long)  # vLLM's forward_cpu, call for call
        for i, generator in generators.items():
            seeds[i] = torch.randint(0, 2**31, (1,), generator=generator, dtype=torch.long).item()
        top_k = None if k is None else k.to(device="cpu", dtype=torch.int32).contiguous()
        top_p = None if p is None else p.to(device="cpu", dtype=torch.float32).contiguous()
        out = torch.empty(rows, dtype=torch.long)
        with self.lock:
            status = self.lib.np_sampler_draw_rows(
                self.sampler,
                ffi.cast("float *", logits.data_ptr()),
                rows,
                vocab,
                ffi.NULL if top_k is None else ffi.cast("int32_t *", top_k.data_ptr()),
                ffi.NULL if top_p is None else ffi.cast("float *", top_p.data_ptr()),
                ffi.cast("int64_t *", seeds.data_ptr()),
                ffi.cast("int64_t *", out.data_ptr()),
                self.bad,
            )
        return None if status else out


def path_of(sampler: Any, logits: Any, generators: Any, k: Any, p: Any, on: bool) -> int:
    """The path a call of forward_cpu takes (PATHS): the C sampler only for what it was written for."""
    if not on:
        return OFF_TURN
    if getattr(sampler, "use_fp64_gumbel", True) is not False:
        return FP64
    if getattr(sampler, "logprobs_mode", None) not in RAW_MODES:
        return PROCESSED
    if k is None and p is None:
        return NO_FILTER
    torch = sys.modules.get("torch")
    if (
        torch is None
        or not isinstance(logits, torch.Tensor)
        or logits.device.type != "cpu"
        or logits.dtype != torch.float32
        or logits.dim() != 2
        or not logits.is_contiguous()
        or not isinstance(generators, dict)
    ):
        return LAYOUT
    return SWAPPED


def swapped_forward(
    original: Callable[..., Any],
    draw: Callable[[Any, dict[int, Any], Any, Any], Any],
    switch: Any,
    log: Callable[[int, int, int, int], None],
) -> Callable[..., Any]:
    """forward_cpu with the C sampler in the turns whose switch byte is SWAP_ON; `log` hears every call."""
    clock = time.perf_counter_ns

    def forward_cpu(self: Any, logits: Any, generators: Any, k: Any, p: Any) -> Any:
        start = clock()
        path = path_of(self, logits, generators, k, p, switch[0] == SWAP_ON)
        if path == SWAPPED:
            try:
                tokens = draw(logits, generators, k, p)
            except Exception:
                tokens, path = None, ERROR
            if tokens is not None:
                log(start, clock(), len(tokens), SWAPPED)
                return tokens, None
            path = REFUSED if path == SWAPPED else path
        try:
            return original(self, logits, generators, k, p)
        finally:
            log(start, clock(), _rows(logits), path)

    forward_cpu.__wrapped__ = original  # type: ignore[attr-defined]
    forward_cpu.__qualname__ = getattr(original, "__qualname__", METHOD)
    return forward_cpu


def _rows(logits: Any) -> int:
    try:
        return int(logits.shape[0])
    except Exception:
        return 0


class Swap:
    """The probe's hook (sitecustomize's load_swap): which module it waits for, the turns the steps take, and
    on that module's import the swap itself, with this process's files."""

    module = MODULE
    turns = TURNS

    def __init__(self, doc: dict[str, Any], directory: str, switch: Any) -> None:
        self.library = str(doc.get("library") or "")
        self.directory = directory
        self.switch = switch
        self.version: str | None = None
        self.swapped = False
        self.why = "vLLM's sampler module was not imported in this process"
        self.calls = [0] * len(PATHS)
        self.rows = [0] * len(PATHS)
        self.pending: list[tuple[int, int, int, int]] = []
        self.flushed_ns = 0
        self.lock = threading.Lock()

    def on_import(self, module: Any) -> None:
        """Replace forward_cpu on the class (before any sampler is made: __init__ binds it) if this vLLM is known."""
        import inspect

        self.version = str(getattr(sys.modules.get("vllm"), "__version__", "unknown"))
        owner = getattr(module, CLASS, None)
        original = vars(owner).get(METHOD) if isinstance(owner, type) else None
        parameters = tuple(inspect.signature(original).parameters) if callable(original) else None
        self.why = problem(self.version, parameters) or ""
        if not self.why and callable(original):
            try:
                drawer = Drawer(*load_library(self.library))
            except Exception as exc:
                self.why = f"the C sampler could not be loaded: {type(exc).__name__}: {exc}"
            else:
                setattr(owner, METHOD, swapped_forward(original, drawer, self.switch, self.log))
                self.swapped = True
                atexit.register(self.flush)
        self.write_status()

    def log(self, start: int, end: int, rows: int, path: int) -> None:
        self.calls[path] += 1
        self.rows[path] += rows
        if len(self.pending) < MAX_PENDING:
            self.pending.append((start, end, rows, path))
        if end - self.flushed_ns > FLUSH_NS:
            self.flush()

    def flush(self) -> None:
        """The calls so far appended to swap-<pid>.tsv, and the counts rewritten; silent when it cannot."""
        try:
            with self.lock:
                self.flushed_ns = time.perf_counter_ns()
                batch = self.pending[:]
                del self.pending[: len(batch)]
                if batch:
                    with open(os.path.join(self.directory, f"swap-{os.getpid()}.tsv"), "a") as handle:
                        handle.write("".join(map(_LINE.__mod__, batch)))
            self.write_status()
        except Exception:
            pass

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "version": self.version,
            "swapped": self.swapped,
            "why": self.why,
            "rows": dict(zip(PATHS, self.rows)),
            "calls": dict(zip(PATHS, self.calls)),
        }

    def write_status(self) -> None:
        try:
            path = os.path.join(self.directory, f"swap-{os.getpid()}.json")
            temporary = os.path.join(self.directory, f".swap-{os.getpid()}.json.tmp")
            with open(temporary, "w") as handle:
                json.dump(self.status(), handle, indent=1)
            os.replace(temporary, path)
        except Exception:
            pass


if __name__ == "__main__":  # the host's check, in the server's own Python, before the server starts
    if sys.argv[1:] == ["--check"]:
        json.dump(installed(), sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.exit(f"usage: {sys.argv[0]} --check")
