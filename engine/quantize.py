"""8-bit weights for the CPU decode path: per-row int8 matrices run by torch's dynamic quantized linear.

torch's int8 linears quantize the activations too (8 bits per tensor), and a Llama's activations have a
few channels hundreds of times larger than the rest: on SmolLM2 plain int8 linears often disagreed with
float32's top-1 token, the FFN down projection the worst (docs/measurements.md). So each
linear is smoothed as SmoothQuant does: input channel j is divided by s_j and the weight's column j
multiplied by it, s_j = act_max_j ** alpha / weight_max_j ** (1 - alpha), with act_max measured by a
float32 calibration pass at load (the product is unchanged in exact arithmetic; both sides quantize well).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

# torch's quantized engine for the int8 linears: "x86" was the fastest of fbgemm, onednn and x86 on the
# AVX-512 EPYC measured here; docs/measurements.md has the per-linear times (benchmarks/bench_int8_kernels.py).
DEFAULT_ENGINE = "x86"


SMOOTHING_ALPHA = 0.5  # SmoothQuant's default split of the outliers between activations and weights


def smoothing_factors(
    act_max: torch.Tensor, weight: torch.Tensor, alpha: float = SMOOTHING_ALPHA
) -> torch.Tensor:
    """s_j per input channel (float32 [in]); channels never seen or all-zero get 1."""
    weight_max = weight.abs().amax(dim=0).float()
    act = act_max.float()
    s = act.clamp(min=1e-5).pow(alpha) / weight_max.clamp(min=1e-5).pow(1 - alpha)
    return torch.where((act > 0) & (weight_max > 0), s, torch.ones_like(s)).clamp(1e-4, 1e4)


def _has_vnni(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU has AVX-512 VNNI, whose int8 dot products accumulate in 32 bits. Without it, fbgemm's
    int8 kernels pair bytes with vpmaddubsw, which saturates at 16 bits for full 8-bit activations, so those
    machines need torch's reduce_range (7-bit activations). Unknown (no /proc): reduce, the safe side."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as lines:
            for line in lines:
                if line.startswith("flags"):
                    return "avx512_vnni" in line.split()
    except OSError:
        pass
    return False


# Read once: the linear calls pass it on every call.
REDUCE_RANGE = not _has_vnni()


def preferred_engine() -> str | None:
    """DEFAULT_ENGINE when this torch has it, else the first int8 engine it has (None: no int8 linears)."""
    engines = [name for name in torch.backends.quantized.supported_engines if name != "none"]
    for name in (DEFAULT_ENGINE, "fbgemm", "onednn"):
        if name in engines:
            return name
    return None


def row_scales(weight: torch.Tensor) -> torch.Tensor:
    """Symmetric per-row scales: each row's largest magnitude maps to 127 (an all-zero row gets scale 1)."""
    amax = weight.abs().amax(dim=1).to(torch.float32)
    return torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`weight` [out, in] as int8 rows and float32 per-row scales (weight ~ int8 * scale[:, None])."""
    scales = row_scales(weight)
    q = torch.round(weight.float() / scales[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scales


@dataclass(slots=True, eq=False)
class Int8Linear:
    """A [out, in] weight prepacked for torch.ops.quantized.linear_dynamic: float activations in, float out.
    The activations are quantized per call (per tensor, 8 bits); the weights once, per output row."""

    packed: Any  # torch's LinearPackedParams for the engine it was packed under
    shape: torch.Size  # [out, in], as the float weight's, for callers that size inputs from it
    engine: str
    inverse_smoothing: torch.Tensor | None = None  # float32 [in]: 1 / s_j, applied to the input

    @classmethod
    def from_float(
        cls,
        weight: torch.Tensor,
        engine: str,
        act_max: torch.Tensor | None = None,
        alpha: float = SMOOTHING_ALPHA,
    ) -> Int8Linear:
        """`act_max` [in]: the largest |input| seen per channel in calibration; None = no smoothing."""
        smoothing = None
        if act_max is not None:
            smoothing = smoothing_factors(act_max, weight, alpha)
            weight = weight.float() * smoothing
        q, scales = quantize_rows(weight)
        zero_points = torch.zeros(q.shape[0], dtype=torch.long)
        with warnings.catch_warnings():
            # torch 2.10+ marks quantized tensor creation deprecated; the packed linear is still its int8 path.
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch._make_per_channel_quantized_tensor(q, scales.double(), zero_points, 0)
            with quantized_engine(engine):
                packed = torch.ops.quantized.linear_prepack(qweight, None)
        inverse = None if smoothing is None else (1.0 / smoothing).contiguous()
        return cls(packed, weight.shape, engine, inverse)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.inverse_smoothing is not None:
            x = x * self.inverse_smoothing
        # Called with an argument that is not a tensor (the packed weights), torch.ops looks for a
        # __torch_function__ override on it, and that lookup raises and swallows a C++ exception per
        # call: half of a batch-1 call's time on SmolLM2 (docs/measurements.md). Nothing here overrides
        # torch functions, so the lookup is switched off around the call.
        with torch._C.DisableTorchFunction():
            # 8-bit activations where VNNI accumulates them without saturating, 7-bit elsewhere (REDUCE_RANGE).
            return torch.ops.quantized.linear_dynamic(x, self.packed, REDUCE_RANGE)


class quantized_engine:  # used like a function, as torch's own context managers are
    """Sets torch.backends.quantized.engine for a block: prepack and run must use the same engine."""

    def __init__(self, engine: str) -> None:
        self.engine, self.previous = engine, ""

    def __enter__(self) -> None:
        self.previous = torch.backends.quantized.engine
        torch.backends.quantized.engine = self.engine

    def __exit__(self, *exc: object) -> None:
        torch.backends.quantized.engine = self.previous


@dataclass(slots=True, eq=False)
class Int8Embedding:
    """Token embedding rows stored as int8 with per-row scales; a lookup dequantizes only the rows it reads."""

    rows: torch.Tensor  # int8 [vocab, dim]
    scales: torch.Tensor  # float32 [vocab]

    @classmethod
    def from_float(cls, weight: torch.Tensor) -> Int8Embedding:
        rows, scales = quantize_rows(weight)
        return cls(rows, scales)

    @property
    def shape(self) -> torch.Size:
        return self.rows.shape

    def __call__(self, token_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(token_ids, self.rows).float() * self.scales.index_select(0, token_ids).unsqueeze(1)
