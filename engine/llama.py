"""A Llama forward in torch (RMSNorm, RoPE, GQA, SwiGLU) that reads and writes K/V in a paged cache on its device."""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from ..errors import UnsupportedModelError
from .blockquant import BlockLinear
from .device import avoid_attention_plan_builds
from .quantize import Int8Embedding, Int8Linear, preferred_engine
from .types import (
    BlockKernel,
    DecodeLayers,
    ModelConfig,
    ModelInput,
    ModelKernels,
    PackedLayer,
)

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    # 8-bit weights (engine.quantize); activations, norms and the KV cache stay float32.
    "int8": torch.float32,
    # 4-bit weights in llama.cpp's Q4_1 numbers, the head in 8 (engine.blockquant), run by a C kernel;
    # the rest float32, as int8's.
    "q4_1": torch.float32,
}
PACKED_FORMATS = ("int8", "q4_1")  # weight formats whose linears are callables, not tensors


def resolve_dtype(name: str) -> torch.dtype:
    """The torch dtype for a user-facing dtype name."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise UnsupportedModelError(
            f"dtype {name!r} is not supported: use float32, bfloat16, int8 or q4_1"
        ) from None


# A linear's weight: float, or packed (Int8Linears in an int8 model, BlockLinears in a q4_1 one).
Weight = torch.Tensor | Int8Linear | BlockLinear


@dataclass(slots=True)
class LayerWeights:
    """One transformer block; matrices are [out, in], Q/K rows in llama.cpp's interleaved-pair order."""

    # The four matrices are Int8Linears in an int8 model (LlamaModel._quantize), BlockLinears in a q4_1 one.
    attn_norm: torch.Tensor  # float32 [dim]
    qkv: Weight  # [(n_heads + 2 * n_kv_heads) * head_dim, dim]
    attn_out: Weight  # [dim, n_heads * head_dim]
    ffn_norm: torch.Tensor  # float32 [dim]
    gate_up: Weight  # [2 * hidden_dim, dim]: gate rows then up rows
    down: Weight  # [dim, hidden_dim]


@dataclass(slots=True)
class LlamaWeights:
    """All weights of a Llama model; `output` None means the head is tied to the token embedding."""

    token_embedding: torch.Tensor  # [vocab, dim]
    layers: list[LayerWeights]
    output_norm: torch.Tensor  # float32 [dim]
    output: torch.Tensor | None = None  # [vocab, dim]


Linear = Callable[[torch.Tensor, Weight], torch.Tensor]
FloatLinear = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
PackedLinear = Callable[[torch.Tensor, Int8Linear | BlockLinear], torch.Tensor]

# SDPA maps query heads onto shared KV heads itself from torch 2.5; older versions need a K/V copy.
_SDPA_HAS_GQA = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 5)


def _plain_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x @ w.t()


def _packed_linear(x: torch.Tensor, w: Int8Linear | BlockLinear) -> torch.Tensor:
    return w(x)


def _for_layers(linear: FloatLinear | PackedLinear) -> Linear:
    """`linear` as the model keeps it: the model only calls it with weights of the format it was chosen for
    (float tensors, or the packed weights that replaced them), an invariant Weight's union cannot state."""
    return typing.cast(Linear, linear)


def _select_linear(dtype: torch.dtype = torch.float32) -> FloatLinear:
    """oneDNN's linear when this torch has it for `dtype`: on the CPUs measured here MKL's small-batch
    sgemm/sgemv ran well below the memory bandwidth (docs/measurements.md), so the plain `x @ w.t()` is only
    the fallback. The probe runs in the model's dtype:
    oneDNN has no bfloat16 inner product on CPUs without AVX-512 (an AVX2-only EPYC refused it)."""
    plain = _plain_linear
    try:
        onednn = torch.ops.mkldnn._linear_pointwise
        probe_x, probe_w = torch.randn(3, 16).to(dtype), torch.randn(5, 16).to(dtype)
        tolerance = 1e-4 if dtype == torch.float32 else 0.25  # bfloat16 keeps 8 bits of mantissa
        if not torch.allclose(
            onednn(probe_x, probe_w, None, "none", [], "").float(),
            plain(probe_x, probe_w).float(),
            atol=tolerance,
        ):
            return plain
    except (AttributeError, RuntimeError, NotImplementedError):
        return plain

    def fast(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        padded = padded_rows(rows)
        if padded == rows or x.dim() != 2:
            return onednn(x, w, None, "none", [], "")
        return onednn(torch.nn.functional.pad(x, (0, 0, 0, padded - rows)), w, None, "none", [], "")[:rows]

    return fast


CALIBRATION_TOKENS = 256  # int8's calibration prefill: at most this many tokens

EXACT_ROWS = 16  # small decode batches: every row count up to here is its own oneDNN shape
WARM_ROWS = 4096  # warm_up() compiles the shapes up to here; larger steps compile theirs when they come


def padded_rows(rows: int) -> int:
    """The row count a oneDNN linear runs at: exact up to EXACT_ROWS, above it rounded up to eight steps
    per doubling (at most 12.5% padding rows, whose outputs are dropped).

    oneDNN (and torch's ideep layer above it, per thread) caches a compiled primitive per input shape,
    1,024 of each by default; with every step's token count its own shape, a long run with varied
    prompt lengths kept filling both caches (RSS 715 -> 1,052 MiB over a 3,000-request soak). With the
    rounding, 56 shapes cover every step of up to 512 tokens (144 up to 2**20)."""
    if rows <= EXACT_ROWS:
        return rows
    step = 1 << (rows.bit_length() - 4)
    return -(-rows // step) * step


def row_buckets(max_rows: int) -> list[int]:
    """Every row count padded_rows() gives for 1..max_rows, ascending."""
    buckets: list[int] = []
    rows = 1
    while rows <= max_rows:
        buckets.append(padded_rows(rows))
        rows = buckets[-1] + 1
    return buckets


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, weight.shape, weight, eps)


@dataclass(slots=True)
class _Prefill:
    """A sequence computing several tokens this step: rows [start, end) of the flat batch."""

    start: int
    end: int
    slots: torch.Tensor | None  # cache slots of its whole context; None when it has no cached prefix
    mask: torch.Tensor | None  # additive [n, context]; None = plain causal


@dataclass(slots=True)
class _StepPlan:
    """Per-step addressing shared by all layers, computed once per forward."""

    rope: torch.Tensor  # complex64 [T, 1, head_dim // 2]
    slots: torch.Tensor  # int64 [T]
    decode_rows: torch.Tensor | None  # rows of the one-token sequences; None when every sequence decodes
    decode_blocks: torch.Tensor | None  # int64 [Bd * max_blocks] block ids (padding -> block 0)
    decode_mask: (
        torch.Tensor | None
    )  # additive [Bd, 1, 1, max_blocks * block_size]; None for a native attention
    prefills: list[_Prefill]
    decode_lens: torch.Tensor | None = None  # int64 [Bd] context lengths, set with decode_blocks


class DecodeReplay(Protocol):
    """Decode steps replayed from captured graphs: engine.cuda_graphs.DecodeGraphs (a protocol here, since that
    module captures this one's forward)."""

    def reset(self, *, scratch_block: int, block_size: int) -> None: ...

    def run(self, inp: ModelInput) -> torch.Tensor | None:
        """The step's logits, or None when it must run eagerly."""
        ...


def _check_heads(config: ModelConfig) -> None:
    """The model's heads divide its width and form whole GQA groups, with an even head_dim (RoPE's pairs)."""
    if config.dim % config.n_heads or config.n_heads % config.n_kv_heads or config.head_dim % 2:
        raise UnsupportedModelError(
            f"model {config.name!r}: dim {config.dim}, {config.n_heads} heads and {config.n_kv_heads} "
            "KV heads do not divide evenly; the engine needs an even head_dim and whole GQA groups"
        )


def _check_format_on(weight_format: str, device: str, *, on_device: bool) -> None:
    """int8 and q4_1 weights run on the CPU only (int8 with a quantized engine in this torch build)."""
    if weight_format == "int8" and (on_device or preferred_engine() is None):
        why = f"not on {device}" if on_device else "and this torch build has no quantized engine"
        raise UnsupportedModelError(f"dtype int8 runs on the CPU only, {why}: use float32 or bfloat16")
    if weight_format == "q4_1" and on_device:
        raise UnsupportedModelError(
            f"dtype q4_1 runs on the CPU only, not on {device}: use float32 or bfloat16"
        )


class LlamaModel:
    """engine.types.Model for a Llama, owning its paged KV cache.

    A layer's K and V pools share one tensor [num_blocks, block_size, 2, n_kv_heads, head_dim] so that
    one gather per layer fetches both; k_cache(layer) and v_cache(layer) are the two pools as views of
    shape [num_blocks, block_size, n_kv_heads, head_dim].
    """

    def __init__(
        self,
        config: ModelConfig,
        weights: LlamaWeights,
        dtype: str = "float32",
        device: str = "cpu",
        calibration_tokens: Sequence[int] | None = None,
        kernels: ModelKernels | None = None,
    ) -> None:
        """`calibration_tokens`: the text whose float32 activations set int8's smoothing (dtype int8 only;
        None = a fixed spread of token ids). `kernels`: native kernels to run in place of torch code:
        dtype q4_1's linears (None: engine.blockquant's Python twin, exact but slow) and the decode
        attention of a float32 KV cache on the CPU (None: a gather and SDPA)."""
        _check_heads(config)
        self.config = config
        self.dtype = resolve_dtype(dtype)  # of activations and the KV cache
        self.weight_format = dtype if dtype in PACKED_FORMATS else str(self.dtype).removeprefix("torch.")
        self.device = torch.device(device)
        on_device = self._on_device = self.device.type != "cpu"
        self._cuda = self.device.type == "cuda"
        if self._cuda:
            avoid_attention_plan_builds()
        self.quantized_engine: str | None = None
        _check_format_on(self.weight_format, device, on_device=on_device)
        cast = self._cast
        embedding = cast(weights.token_embedding)
        self.embedding: torch.Tensor | Int8Embedding = embedding
        self._embed: Callable[[torch.Tensor], torch.Tensor] = lambda ids: F.embedding(ids, embedding).float()
        self.layers = [self._placed_layer(layer) for layer in weights.layers]
        self.output_norm = self._place(weights.output_norm.float())
        self.head: Weight = embedding if weights.output is None else cast(weights.output)
        # oneDNN is the CPU's fast path; on a GPU torch's matmul already calls cuBLAS.
        self._linear = _for_layers(_plain_linear if on_device else _select_linear(self.dtype))
        head_dim = config.head_dim
        # float64 frequencies: positions times frequencies lose precision in float32 at long contexts.
        self._inv_freq = self._place(
            1.0 / (config.rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        )
        self.block_size = 0
        self.num_blocks = 0
        self.kv_pools: list[torch.Tensor] = []  # per layer [num_blocks, block_size, 2, n_kv_heads, head_dim]
        # Decode steps replayed as CUDA graphs (engine.cuda_graphs.DecodeGraphs), or None: every step eager.
        # Set before allocate_kv_cache(): the graphs' padding rows write into one extra scratch block.
        self.graphs: DecodeReplay | None = None
        # The native decode attention reads a float32 pool in host memory. Set before int8's calibration
        # forward, which plans a step as every forward does.
        self._decode_kernel = (
            kernels.decode_attention if kernels and not on_device and self.dtype == torch.float32 else None
        )
        # q4_1's all-decode steps run every layer in one native call, bound to the pools once they exist.
        self._layers_kernel = kernels.decode_layers if kernels and self.weight_format == "q4_1" else None
        self._decode_layers: DecodeLayers | None = None
        if self.weight_format == "int8":
            self._quantize(calibration_tokens)
        elif self.weight_format == "q4_1":
            self._pack_blocks(kernels.block_linear if kernels else None)

    def _placed_layer(self, layer: LayerWeights) -> LayerWeights:
        """One layer's weights on the model's device, in its dtype (the norms in float32)."""
        cast = self._cast
        return LayerWeights(
            attn_norm=self._place(layer.attn_norm.float()),
            qkv=cast(layer.qkv),
            attn_out=cast(layer.attn_out),
            ffn_norm=self._place(layer.ffn_norm.float()),
            gate_up=cast(layer.gate_up),
            down=cast(layer.down),
        )

    @torch.inference_mode()
    def _quantize(self, calibration_tokens: Sequence[int] | None) -> None:
        """Replace the float32 weights by int8 ones (engine.quantize), smoothed with the largest input
        per channel that each linear saw in one float32 prefill of the calibration tokens."""
        engine = preferred_engine()
        assert engine is not None  # checked in __init__
        c = self.config
        tokens = list(calibration_tokens or [])[:CALIBRATION_TOKENS] or [
            (1 + 7919 * i) % c.vocab_size for i in range(CALIBRATION_TOKENS)
        ]
        seen: dict[int, torch.Tensor] = {}
        float_linear = self._linear

        def recording(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            peak = x.detach().abs().amax(dim=0).float()
            previous = seen.get(id(w))
            seen[id(w)] = peak if previous is None else torch.maximum(previous, peak)
            return float_linear(x, w)

        n = len(tokens)
        self.allocate_kv_cache(-(-n // 16), 16)
        self._linear = _for_layers(recording)
        ids = torch.tensor(tokens, dtype=torch.int64)
        positions = torch.arange(n, dtype=torch.int64)
        inp = ModelInput(
            token_ids=ids,
            positions=positions,
            query_lens=[n],
            context_lens=[n],
            block_tables=torch.arange(self.num_blocks, dtype=torch.int32).view(1, -1),
            slot_mapping=positions,
            sample_indices=positions,  # every row through the head: its calibration sees all of them
        )
        self.forward(inp)

        def pack(weight: Weight) -> Int8Linear:
            assert isinstance(weight, torch.Tensor)
            return Int8Linear.from_float(weight, engine, seen.get(id(weight)))

        for layer in self.layers:
            # A linear fed by a norm gets its input smoothing (1/s per input channel) folded into the norm's
            # weight instead of multiplying its input on every call: the same product, 61 multiplies
            # fewer a step. (Folding down's into the up rows too changed gate_up's smoothing and cost
            # top-1 agreement: docs/measurements.md.)
            layer.qkv, layer.attn_out = pack(layer.qkv), pack(layer.attn_out)
            layer.gate_up, layer.down = pack(layer.gate_up), pack(layer.down)
            layer.attn_norm = _take_smoothing(layer.attn_norm, layer.qkv)
            layer.ffn_norm = _take_smoothing(layer.ffn_norm, layer.gate_up)
        # A tied head is packed for the linear; the embedding keeps its own int8 rows for lookups.
        self.head = pack(self.head)
        self.output_norm = _take_smoothing(self.output_norm, self.head)
        self.embedding = Int8Embedding.from_float(_float(self.embedding))
        self._embed = self.embedding
        self._linear = _for_layers(_packed_linear)
        self.quantized_engine = engine
        self.kv_pools, self.num_blocks, self.block_size = [], 0, 0

    def _pack_blocks(self, kernel: BlockKernel | None) -> None:
        """Replace the float32 matrices by block-quantized ones (engine.blockquant): the layers' in 4 bits,
        the head in 8, as llama.cpp's Q4_1 files keep it (a 4-bit head moved SmolLM2's greedy choices
        several times as often: docs/measurements.md). The activations are quantized per block of 32, not
        per tensor as int8's are, so no outlier smoothing and no calibration pass are needed. The embedding
        keeps int8 rows: a lookup reads one row a token."""

        def pack(weight: Weight, bits: int) -> BlockLinear:
            assert isinstance(weight, torch.Tensor)
            return BlockLinear.from_float(weight, bits, kernel)

        for layer in self.layers:
            layer.qkv, layer.attn_out = pack(layer.qkv, 4), pack(layer.attn_out, 4)
            layer.gate_up, layer.down = pack(layer.gate_up, 4), pack(layer.down, 4)
        self.head = pack(self.head, 8)
        self.embedding = Int8Embedding.from_float(_float(self.embedding))
        self._embed = self.embedding
        self._linear = _for_layers(_packed_linear)

    def _cast(self, weight: Weight) -> torch.Tensor:
        assert isinstance(weight, torch.Tensor), "a model is built from float weights; int8 packs them itself"
        return self._place(weight.to(self.dtype))

    def _place(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` on the model's device, contiguous (a no-op copy-free move on the CPU)."""
        return tensor.to(self.device).contiguous()

    # ------------------------------------------------------------------ KV cache

    def kv_bytes_per_block(self, block_size: int) -> int:
        return kv_bytes_per_block(self.config, block_size, self.dtype.itemsize)

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(
                f"KV cache needs num_blocks >= 1 and block_size >= 1, got {num_blocks}, {block_size}"
            )
        c = self.config
        physical = num_blocks + (1 if self.graphs is not None else 0)  # the graphs' scratch block is the last
        self.kv_pools, self._decode_layers = [], None  # free the old pools before allocating new ones
        self.kv_pools = [
            torch.zeros(
                physical, block_size, 2, c.n_kv_heads, c.head_dim, dtype=self.dtype, device=self.device
            )
            for _ in range(c.n_layers)
        ]
        self.num_blocks, self.block_size = physical, block_size
        if self.graphs is not None:
            self.graphs.reset(scratch_block=num_blocks, block_size=block_size)

    def k_cache(self, layer: int) -> torch.Tensor:
        """Layer's K pool as a view [num_blocks, block_size, n_kv_heads, head_dim]."""
        return self.kv_pools[layer][:, :, 0]

    def v_cache(self, layer: int) -> torch.Tensor:
        """Layer's V pool as a view [num_blocks, block_size, n_kv_heads, head_dim]."""
        return self.kv_pools[layer][:, :, 1]

    # ------------------------------------------------------------------ forward

    @torch.inference_mode()
    def warm_up(self, max_tokens: int, max_sampled: int) -> None:
        """Run every linear once at each padded row count a step can use (up to WARM_ROWS), on the
        calling thread: oneDNN's primitives are compiled and cached before the first request instead
        of during the run, so a long run's memory stays flat (the rare shapes of a draining batch
        included) and no step pays for a compilation. The layers share their weights' shapes."""
        if self.weight_format == "q4_1":
            return  # its C kernel compiles nothing per shape
        layer, dtype, device = self.layers[0], self.dtype, self.device
        for rows in row_buckets(min(max_tokens, WARM_ROWS)):
            for weight in (layer.qkv, layer.attn_out, layer.gate_up, layer.down):
                self._linear(torch.zeros(rows, weight.shape[1], dtype=dtype, device=device), weight)
        for rows in row_buckets(min(max_sampled, max_tokens, WARM_ROWS)):
            self._linear(torch.zeros(rows, self.head.shape[1], dtype=dtype, device=device), self.head)

    @torch.inference_mode()
    def forward(self, inp: ModelInput) -> torch.Tensor:
        if not self.kv_pools:
            raise RuntimeError("allocate_kv_cache() must be called before forward()")
        logits = self.graphs.run(inp) if self.graphs is not None else None  # a decode step that fits a bucket
        if logits is None:
            if self._on_device:
                inp = self._to_device(inp)
            logits = self.run_layers(inp.token_ids, self._plan(inp), inp.sample_indices)
        if self._cuda:
            # Returns when the logits are ready, as on the CPU: the wait for the device's kernels is the
            # model's time, not that of whatever reads the logits first (the sampler, the copy to the host).
            torch.cuda.current_stream(self.device).synchronize()
        return logits

    __call__ = forward

    def run_layers(
        self, token_ids: torch.Tensor, plan: _StepPlan, sample_indices: torch.Tensor
    ) -> torch.Tensor:
        """The layers over one step's tokens, addressed by `plan`; the logits of the `sample_indices` rows.
        Shape-static for a decode plan, so engine.cuda_graphs captures it as it stands."""
        c, linear = self.config, self._linear
        q_width, kv_width = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        x = self._embed(token_ids)
        native = self._native_layers(plan)
        if native is not None:
            assert plan.decode_blocks is not None and plan.decode_lens is not None  # an all-decode plan
            tables = plan.decode_blocks.view(x.shape[0], -1)
            native(x, torch.view_as_real(plan.rope), plan.slots, tables, plan.decode_lens)
        else:
            for layer, pool in zip(self.layers, self.kv_pools):
                h = _rms_norm(x, layer.attn_norm, c.norm_eps).to(self.dtype)
                qkv = linear(h, layer.qkv)
                qk = self._rope(qkv[:, : q_width + kv_width], plan.rope)
                q, k, v = qk[:, :q_width], qk[:, q_width:], qkv[:, q_width + kv_width :]
                flat = pool.view(-1, 2, kv_width)
                flat[:, 0].index_copy_(0, plan.slots, k)
                flat[:, 1].index_copy_(0, plan.slots, v)
                attn = self._attention(q, k, v, pool, plan)
                x = x + linear(attn, layer.attn_out)
                h = _rms_norm(x, layer.ffn_norm, c.norm_eps).to(self.dtype)
                gate_up = linear(h, layer.gate_up)
                x = x + linear(F.silu(gate_up[:, : c.hidden_dim]) * gate_up[:, c.hidden_dim :], layer.down)
        x = x.index_select(0, sample_indices)
        h = _rms_norm(x, self.output_norm, c.norm_eps).to(self.dtype)
        return linear(h, self.head).float()

    def _native_layers(self, plan: _StepPlan) -> DecodeLayers | None:
        """The native run of every layer when this step suits it (q4_1, every sequence decoding), bound on
        first use after allocate_kv_cache(); None: the layers run op by op below."""
        if self._layers_kernel is None or plan.decode_rows is not None or plan.prefills:
            return None
        if self._decode_layers is None:
            self._decode_layers = self._layers_kernel(self.config, self.packed_layers())
        return self._decode_layers

    def packed_layers(self) -> list[PackedLayer]:
        """A q4_1 model's layers with their KV pools, as a native decode step reads them."""
        return [
            PackedLayer(
                attn_norm=layer.attn_norm,
                ffn_norm=layer.ffn_norm,
                qkv=_packed(layer.qkv),
                attn_out=_packed(layer.attn_out),
                gate_up=_packed(layer.gate_up),
                down=_packed(layer.down),
                pool=pool,
            )
            for layer, pool in zip(self.layers, self.kv_pools)
        ]

    def _to_device(self, inp: ModelInput) -> ModelInput:
        """The step's host-prepared arrays copied to the model's device (the lengths stay host lists)."""
        device = self.device
        return ModelInput(
            token_ids=inp.token_ids.to(device),
            positions=inp.positions.to(device),
            query_lens=inp.query_lens,
            context_lens=inp.context_lens,
            block_tables=inp.block_tables.to(device),
            slot_mapping=inp.slot_mapping.to(device),
            sample_indices=inp.sample_indices.to(device),
        )

    def _rope(self, qk: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        """Rotate adjacent pairs (llama.cpp's layout of GGUF Q/K rows) as complex products."""
        rows = qk.shape[0]
        pairs = qk.float().unflatten(-1, (-1, self.config.head_dim // 2, 2))
        rotated = torch.view_as_real(torch.view_as_complex(pairs) * rope).view(rows, -1)
        return rotated if self.dtype == torch.float32 else rotated.to(self.dtype)

    def _attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pool: torch.Tensor, plan: _StepPlan
    ) -> torch.Tensor:
        c = self.config
        group, hd, n_kv = c.n_heads // c.n_kv_heads, c.head_dim, c.n_kv_heads
        if plan.decode_rows is None and not plan.prefills:
            return self._decode_attention(q, pool, plan)
        out = torch.empty_like(q)
        if plan.decode_blocks is not None:
            rows = plan.decode_rows
            assert rows is not None  # a plan with prefills lists its decode rows
            out.index_copy_(0, rows, self._decode_attention(q.index_select(0, rows), pool, plan))
        for pre in plan.prefills:
            n = pre.end - pre.start
            # [n, heads, hd] -> [1, heads, n, hd]; enable_gqa maps query head h to KV head h // group.
            q_seq = q[pre.start : pre.end].view(n, c.n_heads, hd).transpose(0, 1).unsqueeze(0)
            if pre.slots is None:
                k_seq = k[pre.start : pre.end].view(n, n_kv, hd)
                v_seq = v[pre.start : pre.end].view(n, n_kv, hd)
            else:
                kv = pool.view(-1, 2, n_kv, hd).index_select(0, pre.slots)
                k_seq, v_seq = kv[:, 0], kv[:, 1]
            gqa: dict[str, bool] = {}
            if group > 1 and _SDPA_HAS_GQA:
                gqa["enable_gqa"] = True
            elif group > 1:
                k_seq, v_seq = k_seq.repeat_interleave(group, 1), v_seq.repeat_interleave(group, 1)
            o = F.scaled_dot_product_attention(
                q_seq,
                k_seq.transpose(0, 1).unsqueeze(0),
                v_seq.transpose(0, 1).unsqueeze(0),
                attn_mask=pre.mask,
                is_causal=pre.mask is None,
                **gqa,
            )
            out[pre.start : pre.end] = o[0].transpose(0, 1).reshape(n, -1)
        return out

    def _decode_attention(self, q: torch.Tensor, pool: torch.Tensor, plan: _StepPlan) -> torch.Tensor:
        """One query per sequence against its blocks gathered into a padded dense K/V with a length mask."""
        c = self.config
        group, hd, n_kv = c.n_heads // c.n_kv_heads, c.head_dim, c.n_kv_heads
        batch = q.shape[0]
        blocks, lens = plan.decode_blocks, plan.decode_lens
        assert blocks is not None and lens is not None  # set together, for every plan with decode rows
        if self._decode_kernel is not None:
            return self._decode_kernel(q, pool, blocks.view(batch, -1), lens, n_kv)
        kv = pool.view(self.num_blocks, -1).index_select(0, blocks).view(batch, -1, 2, n_kv, hd)
        # The group's query heads share one KV head, so they ride along as extra query rows: no K/V copy.
        o = F.scaled_dot_product_attention(
            q.view(batch, n_kv, group, hd),
            kv[:, :, 0].transpose(1, 2),
            kv[:, :, 1].transpose(1, 2),
            attn_mask=plan.decode_mask,
        )
        return o.reshape(batch, -1)

    def _rope_table(self, positions: torch.Tensor) -> torch.Tensor:
        angles = positions.to(torch.float64).unsqueeze(1) * self._inv_freq
        return torch.polar(torch.ones_like(angles), angles).to(torch.complex64).unsqueeze(1)

    def decode_plan(
        self, positions: torch.Tensor, slots: torch.Tensor, blocks: torch.Tensor, lens: torch.Tensor
    ) -> _StepPlan:
        """The plan of a step in which every sequence computes one token: `blocks` int64 [B, n_blocks] of
        block ids (any valid id past a sequence's end: masked), `lens` int64 [B] context lengths. Device
        ops only, no read back to the host, so a CUDA graph can capture it."""
        batch, n_blocks = blocks.shape
        span = torch.arange(n_blocks * self.block_size, device=self.device)
        visible = (span.unsqueeze(0) < lens.unsqueeze(1)).view(batch, 1, 1, -1)
        return _StepPlan(
            self._rope_table(positions), slots, None, blocks.reshape(-1), self._additive(visible), [], lens
        )

    def _plan(self, inp: ModelInput) -> _StepPlan:
        bs, device = self.block_size, self.device
        rope = self._rope_table(inp.positions)
        query_lens, context_lens = inp.query_lens, inp.context_lens
        decode_seqs = [i for i, n in enumerate(query_lens) if n == 1]
        decode_rows = decode_blocks = decode_mask = decode_lens = None
        prefills: list[_Prefill] = []
        if decode_seqs:
            all_decode = len(decode_seqs) == len(query_lens)
            tables = inp.block_tables if all_decode else inp.block_tables[decode_seqs]
            longest = max(context_lens[i] for i in decode_seqs)
            n_blocks = -(-longest // bs)
            decode_blocks = tables[:, :n_blocks].to(torch.int64).clamp(min=0).reshape(-1)
            decode_lens = torch.tensor([context_lens[i] for i in decode_seqs], device=device)
            if self._decode_kernel is None:  # the native attention reads the lengths, not a mask
                span = torch.arange(n_blocks * bs, device=device).unsqueeze(0)
                visible = (span < decode_lens.unsqueeze(1)).view(len(decode_lens), 1, 1, -1)
                decode_mask = self._additive(visible)
            if not all_decode:
                starts = [0]
                for n in query_lens[:-1]:
                    starts.append(starts[-1] + n)
                decode_rows = torch.tensor([starts[i] for i in decode_seqs], device=device)
        row = 0
        for i, n in enumerate(query_lens):
            if n > 1:
                context = context_lens[i]
                prefix = context - n
                slots = mask = None
                if prefix > 0:
                    table = inp.block_tables[i].to(torch.int64)
                    j = torch.arange(context, device=device)
                    slots = table[j // bs] * bs + j % bs
                    mask = self._additive(
                        j.unsqueeze(0) <= (prefix + torch.arange(n, device=device)).unsqueeze(1)
                    )
                prefills.append(_Prefill(row, row + n, slots, mask))
            row += n
        return _StepPlan(
            rope, inp.slot_mapping, decode_rows, decode_blocks, decode_mask, prefills, decode_lens
        )

    def _additive(self, visible: torch.Tensor) -> torch.Tensor:
        """0 / -inf mask built once per step: SDPA would otherwise convert a bool mask in every layer."""
        return torch.zeros(visible.shape, dtype=self.dtype, device=self.device).masked_fill_(
            ~visible, float("-inf")
        )


def _float(weight: torch.Tensor | Int8Embedding) -> torch.Tensor:
    assert isinstance(weight, torch.Tensor), "the embedding is packed once, from its float rows"
    return weight


def _packed(weight: Weight) -> torch.Tensor:
    assert isinstance(weight, BlockLinear) and weight.bits == 4, "q4_1's layers are 4-bit BlockLinears"
    return weight.packed


def _take_smoothing(scale: torch.Tensor, linear: Int8Linear) -> torch.Tensor:
    """`scale` (a norm's weight, per channel) times `linear`'s input smoothing, which the linear then
    no longer applies itself."""
    inverse, linear.inverse_smoothing = linear.inverse_smoothing, None
    return scale if inverse is None else (scale * inverse).contiguous()


def kv_bytes_per_block(config: ModelConfig, block_size: int, itemsize: int) -> int:
    """Bytes one KV block of `block_size` tokens takes: keys and values of every layer's KV heads."""
    return 2 * config.n_layers * block_size * config.n_kv_heads * config.head_dim * itemsize
