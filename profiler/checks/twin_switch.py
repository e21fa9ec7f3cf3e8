"""--verify's in-run A/B of the sampler: one run whose sampler slot serves from the Python or the C twin, switched in ABBA blocks of steps.

Whole runs of the same configuration differ in busy time per token on this shared two-core machine by
more than the sampler's predicted gain on most loads (docs/measurements.md, "Figures moved out of code
comments"); neighbouring blocks of one run share
the machine's drift and the load's, so a gain measured pair by pair is not the machine's (the idea of
profiler.overhead.inrun, with the twins in place of the collectors). A block is a number of steps,
not of seconds (a step's length moves with the load and the model several times over), one by default:
the twins change every other step, so the machine's slow drift cancels between them. Each sampler
call is labelled with the twin that served it, so every step is credited to the right twin exactly.

The sampler can change twins between steps because its state is small and rebuilt on demand: each
live sequence's parameters and its prompt plus the tokens drawn so far. The twin taking over gets
them as fresh registrations, applied in the switch, which is timed and taken out of the step. Two things differ
from an unswitched run, neither of them a cost that favours a twin: a re-registered sequence's RNG
position starts again at 0, and the tokens it drew count as its prompt (for the repetition penalty;
frequency and presence penalties count again from the switch). So the switched run's tokens are not
golden, only its timing is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..overhead.inrun import abba_state

if TYPE_CHECKING:
    import torch

    from ...engine.engine import Engine
    from ...engine.types import Sampler, SamplingParams

# A block is one step (C, Python, Python, C, ...: the twins change every other step), and the intervals
# resample units of 8 steps. The model span's noise on this machine is mostly slow (correlated from one step
# to the next), so the shorter the blocks, the more of it cancels between the twins: blocks of one step gave
# the interval of blocks of eight from a fraction of the steps. Switching is not free, and the twins do not pay
# alike, so each switch is timed and taken out of its step (inrun_gain.label_steps). The figures behind both:
# docs/measurements.md, "Figures moved out of code comments".
BLOCK_STEPS = 1  # sampler calls per block
UNIT_STEPS = 8  # steps per resampled unit (profiler.checks.inrun_gain's unit_blocks = UNIT_STEPS / block)
MAX_CALLS = 1_000_000  # labels kept (16 bytes each): a longer run keeps the first million


class SwitchingSampler:
    """engine.types.Sampler serving from `python` or `native`, the other one idle. Until start() the
    Python twin serves; then the twins take turns every `block_steps` calls in ABBA order (C, Python,
    Python, C, ...), and `calls` keeps (perf_counter_ns at the call, block index, C serving) per call."""

    def __init__(self, python: Sampler, native: Sampler, *, block_steps: int = BLOCK_STEPS) -> None:
        if block_steps < 1:
            raise ValueError(f"block_steps={block_steps}: a block holds at least one step")
        self._twins = (python, native)
        self._serving = False  # False: the Python twin; True: the C twin
        self._sequences: dict[
            int, tuple[SamplingParams, list[int]]
        ] = {}  # live: (params, prompt + tokens drawn)
        self.block_steps = block_steps
        self._alternating = False
        self._call = 0  # sampler calls since start()
        self.calls: list[tuple[int, int, bool]] = []
        self.switch_ns: list[int] = []  # per call in `calls`: the time its switch of twins took (0: none)
        self.switches = 0

    def start(self) -> None:
        """Begin alternating (from any thread: read by the engine thread at its next call)."""
        self._alternating = True

    def add(self, seq_id: int, params: SamplingParams, prompt_token_ids: Sequence[int]) -> None:
        self._twins[self._serving].add(seq_id, params, prompt_token_ids)
        self._sequences[seq_id] = (params, list(prompt_token_ids))

    def remove(self, seq_id: int) -> None:
        self._twins[self._serving].remove(seq_id)
        self._sequences.pop(seq_id, None)

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
        if self._alternating:
            block = self._call // self.block_steps
            switch_ns = self._switch() if abba_state(block) != self._serving else 0
            self._call += 1
            if len(self.calls) < MAX_CALLS:
                self.calls.append((time.perf_counter_ns(), block, self._serving))
                self.switch_ns.append(switch_ns)
        tokens = self._twins[self._serving].sample(logits, seq_ids)
        sequences = self._sequences
        for seq_id, token in zip(seq_ids, tokens):
            sequences[seq_id][1].append(token)
        return tokens

    def _switch(self) -> int:
        """Hand the live sequences to the other twin; returns the ns it took (taken out of the step)."""
        start = time.perf_counter_ns()
        leaving, taking = self._twins[self._serving], self._twins[not self._serving]
        # The leaving twin's removals stay pending until it serves again; both twins apply pending
        # removals before registrations, so the sequences it gets back then are the fresh ones.
        for seq_id in self._sequences:
            leaving.remove(seq_id)
        for seq_id, (params, history) in self._sequences.items():
            taking.add(seq_id, params, list(history))
        # Both of our twins apply what is pending on len(): the registrations happen here, where they are
        # timed, not inside the call that follows.
        apply_pending = getattr(taking, "__len__", None)
        if apply_pending is not None:
            apply_pending()
        self._serving = not self._serving
        self.switches += 1
        return time.perf_counter_ns() - start


class SamplerSwitch:
    """Puts a SwitchingSampler in an engine before it starts, and starts its turns once the collectors run."""

    def __init__(self, *, block_steps: int | None = None) -> None:
        self.block_steps = BLOCK_STEPS if block_steps is None else block_steps
        self.sampler: SwitchingSampler | None = None

    @property
    def unit_blocks(self) -> int:
        """Blocks per unit the intervals resample: UNIT_STEPS' worth, an even number, at least a pair."""
        return max(2, 2 * round(UNIT_STEPS / self.block_steps / 2))

    def install(self, engine: Engine) -> None:
        """Before the engine starts: its sampler (the Python twin) becomes the switch's Python side."""
        from ...native_paths.toggles import make_twin

        config = engine.config
        native = make_twin(
            "sampler",
            True,
            num_blocks=engine.num_blocks,
            block_size=engine.block_size,
            max_batch=config.max_batch,
            max_batched_tokens=config.max_batched_tokens,
        )
        self.sampler = SwitchingSampler(engine.sampler, native, block_steps=self.block_steps)
        engine.sampler = self.sampler

    def start(self, _collectors: object = None) -> None:
        """The session's on_collectors hook: warm-up is over, the measured load is about to start."""
        if self.sampler is None:
            raise RuntimeError("SamplerSwitch.start before install: there is no switching sampler")
        self.sampler.start()

    @property
    def calls(self) -> list[tuple[int, int, bool]]:
        return list(self.sampler.calls) if self.sampler is not None else []

    @property
    def switch_ns(self) -> list[int]:
        return list(self.sampler.switch_ns) if self.sampler is not None else []

    @property
    def switches(self) -> int:
        return self.sampler.switches if self.sampler is not None else 0
