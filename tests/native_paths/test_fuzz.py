"""Random, often invalid, calls into the native adapters: each must answer or raise a Python error, never crash.

Run under the sanitizer build (docs/native-dev.md) this is the fuzz test: any out-of-bounds access,
use after free or undefined behaviour in C aborts the process with a report.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infer_prof.engine.types import NewSequence, SamplingParams, StepPlan
from infer_prof.errors import InvalidSamplingParams
from tests.native_paths.support import FUZZ_EXAMPLES, requires_native

EXPECTED = (ValueError, KeyError, RuntimeError, TypeError, OverflowError, InvalidSamplingParams)
# The prepare and core fuzzers draw plans and tables too (input preparation, the fused core).
ids = st.one_of(st.integers(-3, 12), st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**65))
counts = st.one_of(st.integers(-2, 6), st.integers(-(2**63), 2**63 - 1))


@requires_native
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(
    num_blocks=st.integers(1, 16),
    steps=st.lists(
        st.tuples(
            st.lists(ids, max_size=4), st.lists(st.tuples(ids, counts), max_size=4), st.lists(ids, max_size=5)
        ),
        max_size=12,
    ),
)
def test_allocator_survives_any_steps(num_blocks: int, steps: list) -> None:  # type: ignore[type-arg]
    from infer_prof.native_paths.kv_alloc import NativeKVAllocator

    pool = NativeKVAllocator(num_blocks, 4)
    for frees, grows, batch in steps:
        try:
            tables = pool.step(frees, [g[0] for g in grows], [g[1] for g in grows], batch)
        except EXPECTED:
            continue
        assert tables.shape[0] == len(batch) and tables.dtype == np.int32
        assert ((tables >= -1) & (tables < num_blocks)).all()
    free = pool.free_block_ids()
    assert len(free) == len(set(free)) == pool.num_free_blocks


@requires_native
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(
    policy=st.sampled_from(["fcfs", "priority"]),
    calls=st.lists(
        st.tuples(
            st.lists(
                st.tuples(ids, st.one_of(st.integers(-2, 40), st.integers(2**60, 2**64)), ids), max_size=4
            ),
            st.lists(ids, max_size=4),
            st.one_of(st.integers(-5, 30), st.integers(-(2**63), 2**63 - 1)),
        ),
        max_size=15,
    ),
)
def test_scheduler_survives_any_calls(policy: str, calls: list) -> None:  # type: ignore[type-arg]
    from infer_prof.native_paths.scheduler import NativeScheduler

    scheduler = NativeScheduler(4, 3, 16, policy)
    for arrivals, finished, free_blocks in calls:
        try:
            plan = scheduler.schedule(
                [NewSequence(seq_id, tokens, 4, priority) for seq_id, tokens, priority in arrivals],
                finished,
                free_blocks,
            )
        except EXPECTED:
            continue
        assert len(plan.seq_ids) == len(plan.num_tokens) == len(plan.start_positions) == len(plan.samples)
        assert len(plan) <= 3 and sum(plan.num_tokens) <= 16
        assert scheduler.num_running <= 3 and scheduler.num_waiting >= 0


@st.composite
def sampler_call(draw: st.DrawFn) -> tuple:  # type: ignore[type-arg]
    kind = draw(st.sampled_from(["add", "add", "remove", "sample", "sample", "sample"]))
    if kind == "add":
        params = draw(
            st.builds(
                SamplingParams,
                temperature=st.sampled_from([0.0, 1e-30, 0.5, 1.0, 1e30]),
                top_k=st.integers(0, 70),
                top_p=st.sampled_from([1e-9, 0.5, 1.0]),
                min_p=st.sampled_from([0.0, 0.5, 1.0]),
                repetition_penalty=st.sampled_from([1.0, 1e-30, 3.0]),
                frequency_penalty=st.sampled_from([0.0, 2.0]),
                presence_penalty=st.sampled_from([0.0, -2.0]),
                seed=st.integers(0, 2**64 - 1),
            )
        )
        prompt = draw(st.lists(st.one_of(st.integers(0, 80), st.integers(-5, 2**40)), max_size=6))
        return ("add", draw(ids), params, prompt)
    if kind == "remove":
        return ("remove", draw(ids))
    rows = draw(st.integers(0, 4))
    vocab = draw(st.integers(0, 70))
    special = draw(st.sampled_from([None, np.nan, np.inf, -np.inf]))
    return (
        "sample",
        draw(st.lists(ids, min_size=rows, max_size=rows)),
        vocab,
        special,
        draw(st.sampled_from(["float32", "float32", "float64"])),
        draw(st.integers(0, 2**32 - 1)),
    )


@requires_native
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(sampler_call(), max_size=14))
def test_sampler_survives_any_calls(calls: list) -> None:  # type: ignore[type-arg]
    from infer_prof.native_paths.sampler import NativeSampler

    sampler = NativeSampler()
    for call in calls:
        try:
            if call[0] == "add":
                sampler.add(call[1], call[2], call[3])
            elif call[0] == "remove":
                sampler.remove(call[1])
            else:
                _, seq_ids, vocab, special, dtype, seed = call
                rng = np.random.default_rng(seed)
                logits = (rng.standard_normal((len(seq_ids), vocab)) * 5).astype(dtype)
                if special is not None and logits.size:
                    logits[rng.random(logits.shape) < 0.3] = special
                tokens = sampler.sample(torch.from_numpy(logits), seq_ids)
                assert len(tokens) == len(seq_ids) and all(0 <= t < max(vocab, 1) for t in tokens)
        except EXPECTED:
            continue


def random_plan(draw: st.DrawFn) -> StepPlan:
    rows = draw(st.integers(0, 4))
    column = st.lists(
        st.one_of(st.integers(-3, 40), st.integers(-(2**63), 2**63 - 1)), min_size=rows, max_size=rows
    )
    plan = StepPlan(
        seq_ids=np.array(
            draw(st.lists(ids.filter(lambda i: -(2**63) <= i < 2**63), min_size=rows, max_size=rows)),
            dtype=np.int64,
        ),
        num_tokens=np.array(draw(column), dtype=np.int64),
        start_positions=np.array(draw(column), dtype=np.int64),
        samples=np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=np.bool_),
    )
    if draw(st.integers(0, 9)) == 0:  # arrays of unequal length
        plan.samples = np.ones(rows + 1, dtype=np.bool_)
    return plan


@st.composite
def prepare_call(draw: st.DrawFn) -> tuple:  # type: ignore[type-arg]
    kind = draw(st.sampled_from(["add", "add", "remove", "sampled", "prepare", "prepare", "prepare"]))
    if kind == "add":
        return (
            "add",
            draw(ids),
            draw(st.lists(st.one_of(st.integers(0, 50), st.integers(-5, 2**40)), max_size=40)),
        )
    if kind == "remove":
        return ("remove", draw(ids))
    if kind == "sampled":
        return ("sampled", draw(st.lists(st.one_of(st.integers(0, 50), st.integers(-5, 2**64)), max_size=5)))
    plan = random_plan(draw)
    width = draw(st.integers(0, 6))
    tables = np.array(
        draw(
            st.lists(
                st.integers(-2, 2**31 - 1),
                min_size=len(plan.seq_ids) * width,
                max_size=len(plan.seq_ids) * width,
            )
        ),
        dtype=np.int32,
    ).reshape(len(plan.seq_ids), width)
    if draw(st.booleans()) and width > 1:
        tables = tables[:, : width - 1]  # strided rows
    if draw(st.integers(0, 9)) == 0:
        tables = tables.astype(np.int64)
    return ("prepare", plan, tables)


@requires_native
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_size=st.sampled_from([1, 3, 4]), calls=st.lists(prepare_call(), max_size=16))
def test_prepare_survives_any_calls(block_size: int, calls: list) -> None:  # type: ignore[type-arg]
    from infer_prof.native_paths.prepare import NativePrepare

    prepare = NativePrepare(block_size)
    for call in calls:
        try:
            if call[0] == "add":
                prepare.add(call[1], call[2])
            elif call[0] == "remove":
                prepare.remove(call[1])
            elif call[0] == "sampled":
                prepare.append_sampled(call[1])
            else:
                inp = prepare.prepare(call[1], call[2])
                assert (
                    len(inp.token_ids) == len(inp.positions) == len(inp.slot_mapping) == sum(inp.query_lens)
                )
                assert len(inp.query_lens) == len(call[1].seq_ids)
        except EXPECTED:
            continue


@requires_native
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(["fcfs", "priority"]),
    calls=st.lists(
        st.tuples(
            st.lists(
                st.tuples(ids, st.one_of(st.integers(-2, 40), st.integers(2**60, 2**64)), ids), max_size=3
            ),
            st.lists(ids, max_size=3),
            st.lists(st.tuples(ids, st.lists(st.integers(-2, 60), max_size=30)), max_size=3),
            st.lists(st.one_of(st.integers(0, 50), st.integers(-5, 2**64)), max_size=4),
        ),
        max_size=14,
    ),
)
def test_core_survives_any_calls(policy: str, calls: list) -> None:  # type: ignore[type-arg]
    from infer_prof.native_paths.core import NativeCore

    core = NativeCore(12, 4, 3, 16, policy)
    for arrivals, finished, adds, sampled in calls:
        for seq_id, prompt in adds:
            try:
                core.prepare.add(seq_id, prompt)
            except EXPECTED:
                pass
        try:
            core.prepare.append_sampled(sampled)
        except EXPECTED:
            pass
        try:
            plan = core.scheduler.schedule(
                [NewSequence(seq_id, tokens, 4, priority) for seq_id, tokens, priority in arrivals],
                finished,
                0,
            )
            tables = core.kv_alloc.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
            if len(plan.seq_ids):
                inp = core.prepare.prepare(plan, tables)
                assert len(inp.token_ids) == int(plan.num_tokens.sum())
        except EXPECTED:
            continue
        assert len(plan) <= 3 and core.kv_alloc.num_free_blocks >= 0
