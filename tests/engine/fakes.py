"""A fast fake Model (deterministic logits from the cached token ids) and a fake Tokenizer for engine tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import torch

from infer_prof.engine.types import ModelConfig, ModelInput

BOS, EOS, PAD = 0, 1, 2
FIRST_CHAR_ID = 3
PRINTABLE = [chr(c) for c in range(32, 127)]  # 95 printable ASCII characters


class FakeModel:
    """engine.types.Model without torch layers: it keeps token ids in its paged cache, and the logits of a
    sequence are a seeded random vector keyed by a hash of every token in its cache (read through the
    block table), so wrong paging, a lost block or a wrong position changes the output."""

    def __init__(
        self,
        vocab_size: int = 256,
        context_length: int = 2048,
        *,
        scale: float = 3.0,
        fail_on_token: int | None = None,
        delay_s: float = 0.0,
        eos_at: int | None = None,
    ) -> None:
        self.config = ModelConfig("fake", vocab_size, 8, 1, 1, 1, 8, context_length)
        self.scale = scale
        self.fail_on_token = fail_on_token
        self.delay_s = delay_s
        self.eos_at = eos_at  # from this context length on, EOS gets a logit no other token can beat
        self.cache = torch.empty(0, dtype=torch.int64)
        self.block_size = 0
        self.forward_calls = 0
        self.forward_thread: threading.Thread | None = None

    def kv_bytes_per_block(self, block_size: int) -> int:
        return 64 * block_size

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None:
        self.cache = torch.full((num_blocks * block_size,), -1, dtype=torch.int64)
        self.block_size = block_size

    def forward(self, inp: ModelInput) -> torch.Tensor:
        self.forward_calls += 1
        self.forward_thread = threading.current_thread()
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail_on_token is not None and bool((inp.token_ids == self.fail_on_token).any()):
            raise RuntimeError(f"fake model failure on token {self.fail_on_token}")
        self.cache[inp.slot_mapping] = inp.token_ids
        ends = torch.tensor(inp.query_lens).cumsum(0)
        rows = []
        for flat_index in inp.sample_indices.tolist():
            seq = int(torch.searchsorted(ends, flat_index, right=True))
            context = inp.context_lens[seq]
            assert int(inp.positions[flat_index]) == context - 1, "the sampled token is not the last one"
            positions = torch.arange(context)
            blocks = inp.block_tables[seq, positions // self.block_size].to(torch.int64)
            assert bool((blocks >= 0).all()), "a position maps to no block"
            tokens = self.cache[blocks * self.block_size + positions % self.block_size]
            assert bool((tokens >= 0).all()), "reading a cache slot nobody wrote"
            rows.append(self.logits_for(tokens.tolist()))
        if not rows:
            return torch.empty(0, self.config.vocab_size)
        return torch.stack(rows)

    def logits_for(self, tokens: Sequence[int]) -> torch.Tensor:
        """The logits after `tokens` (the whole context): what serving any batch must reproduce."""
        key = 1469598103934665603
        for token in tokens:  # FNV-1a over the ids: every token and its position matter
            key = ((key ^ (token + 1)) * 1099511628211) % (1 << 61)
        generator = torch.Generator().manual_seed(key)
        logits = torch.randn(self.config.vocab_size, generator=generator) * self.scale
        if self.eos_at is not None and len(tokens) >= self.eos_at:
            logits[EOS] = 1e4
        return logits

    def greedy(
        self, prompt: Sequence[int], max_tokens: int, stop_ids: frozenset[int] = frozenset({EOS})
    ) -> list[int]:
        """What greedy decoding must produce for `prompt`, computed without any engine."""
        tokens, out = list(prompt), []
        while len(out) < max_tokens:
            token = int(self.logits_for(tokens).argmax())
            out.append(token)
            tokens.append(token)
            if token in stop_ids:
                break
        return out


class FakeTokenizer:
    """Ids 0-2 are BOS/EOS/PAD; every other id is one printable ASCII character (cycling past 95)."""

    def __init__(self, vocab_size: int = 256) -> None:
        self.vocab_size = vocab_size
        self.bos_token_id = BOS
        self.eos_token_id = EOS
        self.stop_token_ids = frozenset({EOS})

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = [FIRST_CHAR_ID + (ord(c) - 32 if 32 <= ord(c) < 127 else ord("?") - 32) for c in text]
        return [BOS, *ids] if add_special_tokens else ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        specials = {BOS: "<s>", EOS: "</s>", PAD: "<pad>"}
        return "".join(
            ("" if skip_special_tokens else specials[i])
            if i < FIRST_CHAR_ID
            else PRINTABLE[(i - FIRST_CHAR_ID) % 95]
            for i in ids
        )

    def apply_chat_template(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
        text = "".join(f"[{m['role']}]{m['content']}" for m in messages)
        return text + ("[assistant]" if add_generation_prompt else "")

    def encode_chat(self, user_text: str) -> list[int]:
        return self.encode(self.apply_chat_template([{"role": "user", "content": user_text}]), True)


def char_id(c: str) -> int:
    """The fake tokenizer's id of one printable character."""
    return FIRST_CHAR_ID + ord(c) - 32
