"""The Python reference sampler: draws one token per row of a step's logits, exactly as docs/twin-spec.md says.

Stage order for each row, all arithmetic in float64 on the row's logits `x`:

1. penalties: repetition over prompt ∪ output tokens (divide positive logits by r, multiply negative
   ones), then frequency (times the count) and presence (once) over output tokens;
2. greedy (temperature 0): argmax, the lowest id on ties; nothing below applies;
3. temperature: x / t;
4. top-k: keep the k best by (x descending, id ascending);
5. softmax over the kept tokens;
6. top-p: keep rank r (by p descending, id ascending) iff the p of the ranks before it sum to < top_p;
7. min-p: keep p >= min_p * max p;
8. draw: u = splitmix64_uniform(seed, position); walk kept tokens by ascending id and pick the first
   whose running sum of p exceeds u times their total (the largest kept id if rounding leaves none).

The work is vectorized over the batch: plain greedy rows take one argmax over the float32 logits
(exact: float32 -> float64 is monotone), rows with top-k work in the space of their k candidates,
and the other sampled rows go over the whole vocabulary in chunks of ROW_CHUNK rows. Every op runs
on the logits' device (a GPU's logits are sampled there; only the picked ids come back to the host).
The batch-sized working copies live in buffers kept from step to step (RowBuffers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .types import SamplingParams

MASK64 = (1 << 64) - 1
ROW_CHUNK = 16


def splitmix64(seed: int, position: int) -> int:
    """The 64-bit SplitMix64 output number `position` (0-based) of the stream seeded with `seed`."""
    z = ((seed & MASK64) + (position + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def splitmix64_uniform(seed: int, position: int) -> float:
    """The uniform in [0, 1) that request `seed` uses for its draw at output `position`."""
    return (splitmix64(seed, position) >> 11) * 2.0**-53


@dataclass(slots=True)
class _History:
    """One request's sampling state: its parameters, the tokens penalties look at, its draw position."""

    params: SamplingParams
    seed: int
    position: int = 0
    seen: set[int] = field(default_factory=set)  # prompt ∪ output, for the repetition penalty
    counts: dict[int, int] = field(default_factory=dict)  # output token -> count
    seen_ids: torch.Tensor | None = None  # `seen` as a tensor, rebuilt only when it grows

    def record(self, token: int) -> None:
        self.position += 1
        params = self.params
        if params.repetition_penalty != 1.0 and token not in self.seen:
            self.seen.add(token)
            self.seen_ids = None
        if params.frequency_penalty != 0.0 or params.presence_penalty != 0.0:
            self.counts[token] = self.counts.get(token, 0) + 1

    def seen_tensor(self, device: torch.device) -> torch.Tensor:
        if self.seen_ids is None or self.seen_ids.device != device:
            self.seen_ids = torch.tensor(sorted(self.seen), dtype=torch.int64, device=device)
        return self.seen_ids


class RowBuffers:
    """Row-major working buffers kept across steps: `rows(name, n, ...)` is the first n rows of the one
    named, grown (to a power of two rows) only when a step needs more.

    Why: a step's working copies are batch-sized (a row is the vocabulary in float64), and fresh ones
    each step cost their allocation and their first touch of every page; kept, the sampler's step was
    shorter, drawing the same tokens (docs/measurements.md, "Figures that stood in code comments").
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def rows(self, name: str, n: int, columns: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        key = (name, dtype, device)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape[0] < n or buffer.shape[1] != columns:
            capacity = max(ROW_CHUNK, 1 << max(n - 1, 0).bit_length())
            buffer = self._buffers[key] = torch.empty(capacity, columns, dtype=dtype, device=device)
        return buffer[:n]


class PythonSampler:
    """engine.types.Sampler in vectorized torch; the reference the C twin must match token for token."""

    def __init__(self) -> None:
        self._buffers = RowBuffers()
        self._requests: dict[int, _History] = {}
        self._pending: list[tuple[int, SamplingParams | None, Sequence[int]]] = []

    def add(self, seq_id: int, params: SamplingParams, prompt_token_ids: Sequence[int]) -> None:
        self._pending.append((seq_id, params, prompt_token_ids))

    def remove(self, seq_id: int) -> None:
        self._pending.append((seq_id, None, ()))

    def __len__(self) -> int:
        self._apply_pending()
        return len(self._requests)

    def _apply_pending(self) -> None:
        for seq_id, params, prompt in self._pending:
            if params is None:
                self._requests.pop(seq_id, None)
                continue
            history = _History(params, 0 if params.seed is None else params.seed & MASK64)
            if params.repetition_penalty != 1.0:
                history.seen = set(prompt)
            self._requests[seq_id] = history
        self._pending.clear()

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
        self._apply_pending()
        if logits.dim() != 2 or logits.shape[0] != len(seq_ids):
            raise ValueError(f"logits of shape {tuple(logits.shape)} for {len(seq_ids)} sequences")
        try:
            histories = [self._requests[seq_id] for seq_id in seq_ids]
        except KeyError as missing:
            raise KeyError(f"sequence {missing} was never added to the sampler") from None
        tokens = [0] * len(histories)
        vocab, buffers = logits.shape[1], self._buffers

        def stage1_rows(group: list[int], private: bool) -> torch.Tensor:
            """The group's logits after stage 1, in a buffer valid until the next group. Unpenalized
            groups may stay float32 rows of `logits` (float32 -> float64 is exact and monotone, so argmax
            and top-k agree); `private` asks for a float64 copy the caller may overwrite."""
            group_histories = [histories[i] for i in group]
            rows = _rows(logits, group, buffers)
            penalized = any(h.params.has_penalties for h in group_histories)
            if private or penalized:
                rows = buffers.rows("float64", len(group), vocab, torch.float64, logits.device).copy_(rows)
            if penalized:
                _apply_penalties(rows, group_histories)
            return rows

        greedy = [i for i, h in enumerate(histories) if h.params.greedy and not h.params.has_penalties]
        greedy_penalized = [i for i, h in enumerate(histories) if h.params.greedy and h.params.has_penalties]
        top_k = [i for i, h in enumerate(histories) if not h.params.greedy and 0 < h.params.top_k < vocab]
        full = [i for i, h in enumerate(histories) if not h.params.greedy and not 0 < h.params.top_k < vocab]
        groups = [
            (greedy, _pick_greedy, False),
            (greedy_penalized, _pick_greedy, False),
            (top_k, _draw_top_k, False),
        ]
        # Full-vocabulary rows go in chunks: the sampler's float64 passes over a chunk stay in cache, over
        # a whole wide batch they do not (slower per row: docs/measurements.md, "Figures that stood in code
        # comments").
        groups += [(full[i : i + ROW_CHUNK], _draw_full, True) for i in range(0, len(full), ROW_CHUNK)]
        for group, pick, private in groups:
            if group:
                picks = pick(stage1_rows(group, private), [histories[i] for i in group], buffers)
                for i, token in zip(group, picks):
                    tokens[i] = token

        for history, token in zip(histories, tokens):
            history.record(token)
        return tokens


def _apply_penalties(x: torch.Tensor, histories: list[_History]) -> None:
    """Stage 1, in place on float64 rows: repetition for all rows first, then frequency/presence."""
    vocab, device = x.shape[1], x.device
    flat = x.view(-1)
    index, factor = [], []
    for row, h in enumerate(histories):
        r = h.params.repetition_penalty
        if r != 1.0 and h.seen:
            ids = h.seen_tensor(device)
            index.append(ids + row * vocab)
            factor.append(torch.full((len(ids),), r, dtype=torch.float64, device=device))
    if index:
        flat_index, factors = torch.cat(index), torch.cat(factor)
        values = flat[flat_index]
        flat[flat_index] = torch.where(values > 0, values / factors, values * factors)

    index, counts, frequency, presence = [], [], [], []
    for row, h in enumerate(histories):
        f, p = h.params.frequency_penalty, h.params.presence_penalty
        if (f != 0.0 or p != 0.0) and h.counts:
            index.append(torch.tensor(list(h.counts), dtype=torch.int64, device=device) + row * vocab)
            counts.append(torch.tensor(list(h.counts.values()), dtype=torch.float64, device=device))
            frequency.append(torch.full((len(h.counts),), f, dtype=torch.float64, device=device))
            presence.append(torch.full((len(h.counts),), p, dtype=torch.float64, device=device))
    if index:
        flat_index = torch.cat(index)
        flat[flat_index] -= torch.cat(frequency) * torch.cat(counts) + torch.cat(presence)


def _rows(x: torch.Tensor, rows: list[int], buffers: RowBuffers | None = None) -> torch.Tensor:
    """The given rows of x: x itself when they are all of them (no copy), else a copy (into `buffers`'
    "rows" buffer when given)."""
    if len(rows) == x.shape[0]:
        return x
    if buffers is None:
        return x[rows]
    index = torch.tensor(rows, dtype=torch.int64, device=x.device)
    out = buffers.rows("rows", len(rows), x.shape[1], x.dtype, x.device)
    return torch.index_select(x, 0, index, out=out)


def _params_column(histories: list[_History], name: str, device: torch.device) -> torch.Tensor:
    return torch.tensor(
        [getattr(h.params, name) for h in histories], dtype=torch.float64, device=device
    ).unsqueeze(1)


def _uniforms(histories: list[_History], device: torch.device) -> torch.Tensor:
    uniforms = [splitmix64_uniform(h.seed, h.position) for h in histories]
    return torch.tensor(uniforms, dtype=torch.float64, device=device)


def _pick_greedy(x: torch.Tensor, histories: list[_History], buffers: RowBuffers) -> list[int]:
    """Stage 2: torch.argmax returns the first (lowest id) of equal maxima."""
    return x.argmax(dim=-1).tolist()


def _draw_full(x: torch.Tensor, histories: list[_History], buffers: RowBuffers) -> list[int]:
    """Stages 3 and 5-8 over the whole vocabulary (rows without top-k); works in place on x."""
    x.div_(_params_column(histories, "temperature", x.device))
    return _draw(x, None, histories, buffers).tolist()


def _draw_top_k(x: torch.Tensor, histories: list[_History], buffers: RowBuffers) -> list[int]:
    """Stages 3-8 in the space of each row's k candidates (sorted by id, padded past k); x is read only."""
    vocab, device = x.shape[1], x.device
    k = torch.tensor([h.params.top_k for h in histories], dtype=torch.int64, device=device)
    temperature = _params_column(histories, "temperature", device)
    k_max = int(k.max())  # < vocab, so k_max + 1 candidates exist
    values, ids = torch.topk(x, k_max + 1, dim=-1)
    # Temperature on the candidates only: dividing by t > 0 never reorders, it can only create ties.
    values = values.to(torch.float64).div_(temperature)
    boundary = values.gather(1, (k - 1).unsqueeze(1))
    # torch.topk breaks ties arbitrarily. Where the k-th value equals the next one, tokens left out may
    # share it: redo that row over the whole vocabulary, keeping the lowest ids among the tied ones.
    for row in (
        torch.nonzero(boundary.squeeze(1) == values.gather(1, k.unsqueeze(1)).squeeze(1)).flatten().tolist()
    ):
        kr, threshold = int(k[row]), boundary[row]
        row_values = x[row].to(torch.float64) / temperature[row]
        above = torch.nonzero(row_values > threshold).flatten()
        tied = torch.nonzero(row_values == threshold).flatten()[: kr - len(above)]
        ids[row, :kr] = torch.cat([above, tied])
        values[row, :kr] = row_values[ids[row, :kr]]
    cols = torch.arange(k_max + 1, device=device).unsqueeze(0)
    valid = cols < k.unsqueeze(1)
    ids = torch.where(valid, ids, vocab + cols)  # padding sorts after every real id
    ids, by_id = torch.sort(ids, dim=-1)
    valid = ids < vocab
    values = values.gather(1, by_id).masked_fill_(~valid, float("-inf"))
    picks = _draw(values, valid, histories, None)
    return ids.gather(1, picks.unsqueeze(1)).squeeze(1).tolist()


def _draw(
    x: torch.Tensor, valid: torch.Tensor | None, histories: list[_History], buffers: RowBuffers | None
) -> torch.Tensor:
    """Stages 5-8 on rows whose columns are in ascending id order (x is consumed); returns the picked
    columns. Full-vocabulary rows pass `buffers` for their batch-sized masks."""
    p = x.sub_(x.max(dim=-1, keepdim=True).values).exp_()  # -inf (padding) becomes exactly 0
    p.div_(p.sum(dim=-1, keepdim=True))
    keep = None if valid is None else valid.clone()

    top_p_rows = [i for i, h in enumerate(histories) if h.params.top_p < 1.0]
    if top_p_rows:
        top_p = torch.tensor(
            [histories[i].params.top_p for i in top_p_rows], dtype=torch.float64, device=x.device
        )
        kept = _top_p_keep(_rows(p, top_p_rows), top_p)
        keep = _and_rows(keep, p, top_p_rows, kept)

    min_p_rows = [i for i, h in enumerate(histories) if h.params.min_p > 0.0]
    if min_p_rows:
        rows_p = _rows(p, min_p_rows)
        min_p = torch.tensor(
            [histories[i].params.min_p for i in min_p_rows], dtype=torch.float64, device=x.device
        )
        out = (
            None
            if buffers is None
            else buffers.rows("min_p", len(min_p_rows), p.shape[1], torch.bool, p.device)
        )
        kept = torch.ge(rows_p, min_p.unsqueeze(1) * rows_p.max(dim=-1, keepdim=True).values, out=out)
        keep = _and_rows(keep, p, min_p_rows, kept)

    drop = None
    if keep is not None:  # keep is this call's own (a clone, a fresh or buffered mask): inverted in place
        drop = keep.logical_not_()
        p.masked_fill_(drop, 0.0)
    cumulative = p.cumsum_(dim=-1)  # sequential, in id order, as the spec's loop
    target = _uniforms(histories, x.device).unsqueeze(1) * cumulative[:, -1:]
    picks = torch.searchsorted(cumulative, target, right=True).squeeze(1)  # first cum > target
    overflow = picks >= x.shape[1]
    if bool(overflow.any()):  # rounding left no token: the largest kept id
        keep = torch.ones_like(p, dtype=torch.bool) if drop is None else ~drop
        last_kept = x.shape[1] - 1 - keep.flip(-1).to(torch.int8).argmax(dim=-1)
        picks = torch.where(overflow, last_kept, picks)
    return picks


def _and_rows(
    keep: torch.Tensor | None, p: torch.Tensor, rows: list[int], kept: torch.Tensor
) -> torch.Tensor:
    if keep is None and len(rows) == p.shape[0]:
        return kept
    if keep is None:
        keep = torch.ones_like(p, dtype=torch.bool)
    keep[rows] &= kept
    return keep


def _top_p_keep(p: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Stage 6 on rows in ascending id order: which tokens survive top-p (ranked by p desc, id asc).

    Only the sorted *values* are needed: the sums before each rank do not depend on how equal values
    are ordered, so the cut is found on numpy's (SIMD, several times faster than torch's) value sort,
    and the ids at the cut follow from comparisons: all tokens above the cut value, then the lowest
    ids among those equal to it.
    """
    if p.device.type == "cpu":
        sorted_desc = torch.from_numpy(np.ascontiguousarray(np.sort(p.numpy(), axis=-1)[:, ::-1]))
    else:  # on a GPU the device's own sort; the values, not their order among equals, decide the cut
        sorted_desc = torch.sort(p, dim=-1, descending=True).values
    # `before` never decreases, so the kept ranks are a prefix; rank 0 (before = 0) is always kept.
    num_kept = torch.count_nonzero(_exclusive_cumsum(sorted_desc) < top_p.unsqueeze(1), dim=-1)
    cut = sorted_desc.gather(1, (num_kept - 1).unsqueeze(1))
    keep = p > cut
    tied = p == cut
    ties_kept = num_kept - torch.count_nonzero(keep, dim=-1)
    for row in torch.nonzero(torch.count_nonzero(tied, dim=-1) > ties_kept).flatten().tolist():
        tied[row] &= torch.cumsum(tied[row], dim=0) <= ties_kept[row]
    return keep.logical_or_(tied)


def _exclusive_cumsum(values: torch.Tensor) -> torch.Tensor:
    """Sum of the entries before each column, accumulated left to right (matches a C loop exactly)."""
    out = torch.zeros_like(values)
    out[:, 1:] = torch.cumsum(values[:, :-1], dim=-1)
    return out
