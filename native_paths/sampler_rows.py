"""The C twin of engine/sampler_rows.py: another engine's batch drawn by csrc/sampler.c's np_sampler_draw_rows, one call for every row, over the tensors' own memory."""

from __future__ import annotations

import weakref
from typing import NoReturn

import torch

from .loader import require


class NativeRowSampler:
    """draw() reads the logits, top-k and top-p where they lie (no copy into Python objects) and writes the tokens."""

    def __init__(self) -> None:
        self._ffi, self._lib = require()
        self._sampler = self._lib.np_sampler_create()
        if self._sampler == self._ffi.NULL:
            raise MemoryError("cannot allocate the native sampler")
        self._finalizer = weakref.finalize(self, self._lib.np_sampler_destroy, self._sampler)
        self._bad_index = self._ffi.new("int64_t *")

    def close(self) -> None:
        self._finalizer()

    def draw(
        self,
        logits: torch.Tensor,
        top_k: torch.Tensor | None,
        top_p: torch.Tensor | None,
        seeds: torch.Tensor,
    ) -> torch.Tensor:
        """int64 tokens [rows] for float32 logits [rows, vocab] (C-contiguous, CPU), int32 top_k, float32 top_p
        and int64 seeds [rows] (each None-able but seeds); ValueError for what C refuses."""
        if logits.device.type != "cpu" or logits.dtype != torch.float32 or logits.dim() != 2:
            raise ValueError(
                f"logits must be float32 [rows, vocab] on the CPU, got {logits.dtype} on {logits.device}"
            )
        if not logits.is_contiguous():
            raise ValueError("logits must be contiguous")
        rows, vocab = logits.shape
        ffi = self._ffi
        k = _column(top_k, torch.int32, rows, "top_k")
        p = _column(top_p, torch.float32, rows, "top_p")
        s = _column(seeds, torch.int64, rows, "seeds")
        assert s is not None
        out = torch.empty(rows, dtype=torch.int64)
        status = self._lib.np_sampler_draw_rows(
            self._sampler,
            ffi.cast("float *", logits.data_ptr()),
            rows,
            vocab,
            ffi.NULL if k is None else ffi.cast("int32_t *", k.data_ptr()),
            ffi.NULL if p is None else ffi.cast("float *", p.data_ptr()),
            ffi.cast("int64_t *", s.data_ptr()),
            ffi.cast("int64_t *", out.data_ptr()),
            self._bad_index,
        )
        if status:
            self._raise(status)
        return out

    def _raise(self, status: int) -> NoReturn:
        lib, row = self._lib, self._bad_index[0]
        if status == lib.NP_ERR_NONFINITE:
            raise ValueError(f"logits row {row} has NaN, or +inf / only -inf")
        if status == lib.NP_ERR_NOMEM:
            raise MemoryError("the native sampler ran out of memory")
        raise ValueError(
            f"np_sampler_draw_rows refused row {row}: a negative top_k or a top_p outside (0, 1]"
        )


def _column(values: torch.Tensor | None, dtype: torch.dtype, rows: int, name: str) -> torch.Tensor | None:
    """`values` as a contiguous CPU column of `dtype` (a copy of `rows` numbers only where it is not one)."""
    if values is None:
        return None
    if values.shape != (rows,):
        raise ValueError(f"{name} of shape {tuple(values.shape)} for {rows} rows")
    return values.to(device="cpu", dtype=dtype).contiguous()
