"""The native sampler: engine.types.Sampler backed by csrc/sampler.c, one C call per step for the whole batch."""

from __future__ import annotations

import struct
import weakref
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..engine.types import SamplingParams
from .loader import require

MASK64 = (1 << 64) - 1
# Room the C side keeps past the last block of a row (csrc/sampler.c: BLOCK).
MAX_VOCAB = 2**31 - 1 - 128


PASS_F_VARIANTS = {2: "AVX-512+FMA", 1: "AVX2+FMA", 0: "portable"}


def pass_f_variant() -> str:
    """Which build of the sampler's fast softmax sum (pass F, most of a top-p row's time) runs here: the
    widest this CPU has, so that sampler timings can say what they measured."""
    _, lib = require()
    return PASS_F_VARIANTS[lib.np_sampler_pass_f_variant()]


def _params_tuple(params: SamplingParams) -> tuple[float, float, float, float, float, float, int, int]:
    """np_sampling_params, field by field (the seed resolved as the Python twin does)."""
    return (
        float(params.temperature),
        float(params.top_p),
        float(params.min_p),
        float(params.repetition_penalty),
        float(params.frequency_penalty),
        float(params.presence_penalty),
        int(params.top_k),
        0 if params.seed is None else params.seed & MASK64,
    )


class NativeSampler:
    """Draws the same tokens as engine.sampler.PythonSampler (up to floating-point near-ties).

    Registrations and removals are buffered here and handed to C inside the next sample() call,
    where C applies the removals first, then the registrations: the same outcome as the Python
    twin's ordered replay, because a later add of an id replaces an earlier one and a remove
    cancels an add still pending.
    """

    needs_host_logits = True  # C reads host memory: the engine copies a GPU's logits in a "d2h" span first

    def __init__(self) -> None:
        self._ffi, self._lib = require()
        self.calls = 0
        self._sampler = self._lib.np_sampler_create()
        if self._sampler == self._ffi.NULL:
            raise MemoryError("cannot allocate the native sampler")
        self._finalizer = weakref.finalize(self, self._lib.np_sampler_destroy, self._sampler)
        self._adds: dict[int, tuple[tuple[Any, ...], bytes]] = {}
        self._removes: list[int] = []
        self._bad_index = self._ffi.new("int64_t *")
        self._step = self._lib.np_sampler_step

    def close(self) -> None:
        """Free the C state now (otherwise it goes when the object is collected)."""
        self._finalizer()

    def add(self, seq_id: int, params: SamplingParams, prompt_token_ids: Sequence[int]) -> None:
        """Register a request (seed already resolved in params.seed); takes effect at the next sample()."""
        prompt = b""
        if params.repetition_penalty != 1.0 and len(prompt_token_ids):  # only then do prompt tokens matter
            if min(prompt_token_ids) < 0:
                raise ValueError(f"sequence {seq_id}: prompt token ids must be >= 0")
            try:
                prompt = array("i", prompt_token_ids).tobytes()
            except (OverflowError, TypeError) as error:
                raise ValueError(f"sequence {seq_id}: prompt token ids must be int32 ({error})") from None
        self._adds[seq_id] = (_params_tuple(params), prompt)

    def remove(self, seq_id: int) -> None:
        """Forget a finished request; takes effect at the next sample()."""
        self._adds.pop(seq_id, None)
        self._removes.append(seq_id)

    def __len__(self) -> int:
        self._call(None, 0, 0, b"")
        return self._lib.np_sampler_num_requests(self._sampler)

    def position(self, seq_id: int) -> int:
        """Tokens drawn so far for seq_id (-1 if unknown); for tests."""
        self._call(None, 0, 0, b"")
        return self._lib.np_sampler_position(self._sampler, seq_id)

    @property
    def exact_passes(self) -> int:
        """Rows so far whose fast approximate softmax sum could not settle a decision (then done exactly)."""
        return self._lib.np_sampler_exact_passes(self._sampler)

    def sample(self, logits: torch.Tensor | np.ndarray, seq_ids: Sequence[int]) -> list[int]:
        """logits: float32 [len(seq_ids), vocab], C-contiguous, on the CPU (a CUDA tensor is copied over)."""
        self.calls += 1  # foreign calls made, for the budget counters (one per engine step)
        pointer, rows, vocab, keep_alive = self._logits_pointer(logits, len(seq_ids))
        try:
            ids = struct.pack(f"{rows}q", *seq_ids)
        except struct.error as error:
            raise ValueError(f"sequence ids must be ints that fit in int64 ({error})") from None
        out = self._ffi.new("int64_t[]", max(rows, 1))
        self._call(pointer, rows, vocab, ids, out, seq_ids)
        del keep_alive
        return self._ffi.unpack(out, rows)

    # -- internals ------------------------------------------------------------------------------

    def _logits_pointer(self, logits: torch.Tensor | np.ndarray, rows: int) -> tuple[Any, int, int, Any]:
        """A float* over the logits' own memory (no copy), after checking shape, dtype and layout."""
        if isinstance(logits, torch.Tensor):
            if logits.device.type != "cpu":
                logits = logits.detach().to("cpu")  # C reads host memory; this is the one copy
            if logits.dtype != torch.float32:
                raise ValueError(f"logits must be float32, got {logits.dtype}")
            if not logits.is_contiguous():
                raise ValueError("logits must be contiguous (call .contiguous() first)")
            shape = tuple(logits.shape)
            pointer = self._ffi.cast("float *", logits.data_ptr())
        elif isinstance(logits, np.ndarray):
            if logits.dtype != np.float32:
                raise ValueError(f"logits must be float32, got {logits.dtype}")
            if not logits.flags.c_contiguous:
                raise ValueError("logits must be C-contiguous (use np.ascontiguousarray)")
            shape = logits.shape
            pointer = self._ffi.from_buffer("float[]", logits) if logits.size else self._ffi.NULL
        else:
            raise TypeError(f"logits must be a torch.Tensor or numpy.ndarray, got {type(logits).__name__}")
        if len(shape) != 2 or shape[0] != rows:
            raise ValueError(f"logits of shape {shape} for {rows} sequences")
        vocab = shape[1]
        if rows and not 1 <= vocab <= MAX_VOCAB:
            raise ValueError(f"vocabulary size {vocab} is outside [1, {MAX_VOCAB}]")
        return pointer, rows, vocab, logits

    def _call(
        self, pointer: Any, rows: int, vocab: int, ids: bytes, out: Any = None, seq_ids: Sequence[int] = ()
    ) -> None:
        ffi = self._ffi
        # Take the pending work as it is now: an add() from another thread during the call goes to
        # the fresh containers and waits for the next call instead of being lost.
        adds, removes = self._adds, self._removes
        self._adds, self._removes = {}, []
        n_add, n_remove = len(adds), len(removes)
        add_ids = add_params = offsets = tokens = ffi.NULL
        if n_add:
            add_ids = ffi.new("int64_t[]", list(adds))
            add_params = ffi.new("np_sampling_params[]", [params for params, _ in adds.values()])
            prompts = [prompt for _, prompt in adds.values()]
            lengths = [len(prompt) // 4 for prompt in prompts]
            bounds = [0] * (n_add + 1)
            for i, length in enumerate(lengths):
                bounds[i + 1] = bounds[i] + length
            offsets = ffi.new("int64_t[]", bounds)
            joined = b"".join(prompts)
            tokens = ffi.from_buffer("int32_t[]", joined) if joined else ffi.NULL
        remove_ids = ffi.new("int64_t[]", removes) if n_remove else ffi.NULL
        row_ids = ffi.from_buffer("int64_t[]", ids) if rows else ffi.NULL
        status = self._step(
            self._sampler,
            remove_ids,
            n_remove,
            add_ids,
            add_params,
            offsets,
            tokens,
            n_add,
            pointer if pointer is not None else ffi.NULL,
            rows,
            vocab,
            row_ids,
            out if out is not None else ffi.NULL,
            self._bad_index,
        )
        if status == self._lib.NP_ERR_ARG:  # refused before applying anything: keep it pending
            self._removes[:0] = removes
            self._adds = {**adds, **self._adds}
        if status:
            self._raise(status, seq_ids, vocab)

    def _raise(self, status: int, seq_ids: Sequence[int], vocab: int) -> None:
        lib, index = self._lib, self._bad_index[0]
        seq = seq_ids[index] if 0 <= index < len(seq_ids) else None
        if status == lib.NP_ERR_UNKNOWN_SEQ:
            raise KeyError(f"sequence {seq} was never added to the sampler")
        if status == lib.NP_ERR_TOKEN_RANGE:
            raise ValueError(f"sequence {seq} has a prompt or output token id >= the vocabulary size {vocab}")
        if status == lib.NP_ERR_NONFINITE:
            raise ValueError(
                f"logits row {index} (sequence {seq}) has NaN, or +inf / only -inf where it samples"
            )
        if status == lib.NP_ERR_NOMEM:
            raise MemoryError("the native sampler ran out of memory")
        raise ValueError(f"np_sampler_step refused its arguments (status {status}, entry {index})")
