"""The C sampler against the Python one: the same token for every row, or a near-tie the reference can name."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infer_prof.engine.sampler import PythonSampler
from infer_prof.engine.types import Sampler, SamplingParams
from tests.native_paths.spec_reference import NEAR_TIE, penalized, reference_draw, seed_for, uniform
from tests.native_paths.support import requires_native, twin_params

INF = float("inf")


def make_native() -> Sampler:
    from infer_prof.native_paths.sampler import NativeSampler

    return NativeSampler()


parametrize_sampler = pytest.mark.parametrize("make_sampler", twin_params(PythonSampler, make_native))


@parametrize_sampler
def test_is_a_sampler_and_refuses_unknown_or_removed_sequences(make_sampler) -> None:  # type: ignore[no-untyped-def]
    sampler = make_sampler()
    assert isinstance(sampler, Sampler)
    sampler.add(1, SamplingParams(), [])
    sampler.remove(1)
    with pytest.raises(KeyError, match="never added"):
        sampler.sample(torch.zeros(1, 4), [1])
    with pytest.raises(ValueError):
        sampler.sample(torch.zeros(2, 4), [1])


@parametrize_sampler
def test_greedy_takes_the_lowest_id_of_equal_maxima_and_sees_penalties(make_sampler) -> None:  # type: ignore[no-untyped-def]
    sampler = make_sampler()
    sampler.add(1, SamplingParams(), [])
    sampler.add(2, SamplingParams(repetition_penalty=2.0), [3])  # 3 is in the prompt: 4.0 -> 2.0
    sampler.add(3, SamplingParams(), [])
    logits = torch.tensor([[1.0, 4.0, 0.5, 4.0, -0.0], [1.0, 2.0, 0.5, 4.0, 2.0], [-INF] * 5])
    assert sampler.sample(logits, [1, 2, 3]) == [1, 1, 0]
    # -0.0 and +0.0 are equal: the lower id wins.
    assert sampler.sample(torch.tensor([[-0.0, 0.0, -1.0]]), [1]) == [0]


@parametrize_sampler
def test_draw_picks_the_first_token_whose_cumulative_p_exceeds_the_target(make_sampler) -> None:  # type: ignore[no-untyped-def]
    cases = [(0.5, 1), (0.5 - 2**-53, 0), (0.25, 1), (0.75, 3), (0.0, 0)]
    sampler = make_sampler()
    for seq_id, (u, _) in enumerate(cases):
        sampler.add(seq_id, SamplingParams(temperature=1.0, seed=seed_for(u)), [])
    logits = torch.tensor([[0.0, 0.0, -INF, -INF]] * 2 + [[0.0] * 4] * 3)  # p = 1/2 twice, then 1/4 each
    assert sampler.sample(logits, list(range(len(cases)))) == [token for _, token in cases]


@parametrize_sampler
def test_top_k_keeps_the_lowest_ids_among_equal_values(make_sampler) -> None:  # type: ignore[no-untyped-def]
    # Values equal at the k-th place: ids 0 and 2 (the lowest) are kept, 3 and 5 are not.
    sampler = make_sampler()
    for seq_id in range(40):
        sampler.add(seq_id, SamplingParams(temperature=1.0, top_k=3, seed=seq_id), [])
    logits = torch.tensor([[1.0, 1.5, 1.0, 1.0, -2.0, 1.0]] * 40)
    assert set(sampler.sample(logits, list(range(40)))) == {0, 1, 2}


@parametrize_sampler
def test_re_adding_a_request_resets_it_and_positions_advance_for_greedy_rows(make_sampler) -> None:  # type: ignore[no-untyped-def]
    sampler = make_sampler()
    params = SamplingParams(temperature=1.0, seed=7)
    sampler.add(5, params, [])
    logits = torch.zeros(1, 64)
    first = [sampler.sample(logits, [5])[0] for _ in range(4)]
    sampler.add(5, params, [])  # replaces: the position starts again at 0
    assert [sampler.sample(logits, [5])[0] for _ in range(4)] == first
    assert first == [int(uniform(7, position) * 64) for position in range(4)]


@parametrize_sampler
def test_frequency_and_presence_penalties_follow_the_output(make_sampler) -> None:  # type: ignore[no-untyped-def]
    sampler = make_sampler()
    sampler.add(1, SamplingParams(frequency_penalty=1.0, presence_penalty=0.5), [0, 0, 0])
    logits = torch.tensor([[3.0, 2.0, 1.0]])
    # Greedy: 0 (3.0); then 0 is at 3 - (1 + 0.5) = 1.5 and 1 wins; then 0 (1.5 over 0.5 and 1.0);
    # then 0 is at 3 - (2 + 0.5) = 0.5 and 2 (1.0) wins.
    assert [sampler.sample(logits, [1])[0] for _ in range(4)] == [0, 1, 0, 2]


@parametrize_sampler
def test_a_top_p_cut_exactly_on_the_boundary(make_sampler) -> None:  # type: ignore[no-untyped-def]
    # p = 1/4 each: the sum before rank 2 is exactly 0.5, so rank 2 is dropped; only 0 and 1 remain.
    sampler = make_sampler()
    for seq_id in range(40):
        sampler.add(seq_id, SamplingParams(temperature=1.0, top_p=0.5, seed=seq_id), [])
    assert set(sampler.sample(torch.zeros(40, 4), list(range(40)))) == {0, 1}


@requires_native
def test_decisions_too_close_for_the_fast_sum_are_redone_exactly() -> None:
    sampler = make_native()
    sampler.add(1, SamplingParams(temperature=1.0, top_p=0.5, seed=3), [])  # the cut on a boundary
    sampler.add(2, SamplingParams(temperature=1.0, seed=seed_for(0.5)), [])  # the draw on a boundary
    sampler.add(3, SamplingParams(temperature=1.0, top_p=0.9, seed=3), [])  # far from any boundary
    logits = torch.tensor([[0.0] * 4, [0.0, 0.0, -INF, -INF], [5.0, 0.0, -1.0, -2.0]])
    assert sampler.sample(logits, [1, 2, 3])[1:] == [1, 0]
    assert sampler.exact_passes == 2


@requires_native
def test_the_far_blocks_coarse_sum_never_decides_a_cut_its_bound_leaves_open(pass_f_build: str) -> None:
    """Blocks 15 binary orders under the top take pass F's coarse 2^a, exact there (a is an integer),
    so their midpoint estimate is 2.9% low: p(A) reads 0.9008 where it is 0.8995. A top-p 0.9 cut made
    on that estimate would keep A alone; the bound leaves it open and a tighter sum keeps A and B, and
    the draw at u = 0.99 lands on B, as in Python. A last row, p(A) = 0.93, is decided at once."""
    vocab, bulk = 16 * 128, 1824

    def row(p_a: float) -> np.ndarray:
        x = np.full(vocab, -INF)
        x[128 : 128 + bulk] = -15 * np.log(2)  # blocks 1-15: far below A, in the coarse sum
        e_bulk = bulk * 2.0**-15  # relative to A's e = 1
        x[5], x[6] = 0.0, np.log(1 / p_a - 1 - e_bulk)  # A and B share block 0: summed finely
        return x

    logits = np.array([row(0.8995)] * 4 + [row(0.93)], dtype=np.float32)
    python, native = PythonSampler(), make_native()
    for seq_id in range(len(logits)):
        for sampler in (python, native):
            sampler.add(seq_id, SamplingParams(temperature=1.0, top_p=0.9, seed=seed_for(0.99)), [])
    seq_ids = list(range(len(logits)))
    expected = python.sample(torch.from_numpy(logits), seq_ids)
    assert expected == [6, 6, 6, 6, 5]
    assert native.sample(torch.from_numpy(logits), seq_ids) == expected


@requires_native
def test_twins_agree_when_the_kth_block_lies_binades_below_the_top() -> None:
    """Top-k's threshold comes from counting block maxima by their top 16 bits under the largest;
    three blocks far above the rest put the k-th largest 255 such buckets down, where the exact
    radix selection takes over."""
    rng = np.random.default_rng(41)
    rows, vocab = 4, 40 * 128 + 3
    python, native = PythonSampler(), make_native()
    requests = {}
    for seq_id in range(rows):
        request = SamplingParams(temperature=1.0, top_k=(2, 10, 30, 60)[seq_id], seed=500 + seq_id)
        register(python, native, requests, seq_id, request, [])
    for _ in range(3):
        logits = rng.standard_normal((rows, vocab)) * 0.5 + 0.01
        logits[:, [40, 700, 3000]] = 5000.0 + rng.standard_normal((rows, 3))
        compare_step(python, native, logits.astype(np.float32), list(range(rows)), requests)


@requires_native
def test_twins_agree_when_a_penalty_lifts_many_prompt_tokens_into_the_top_k() -> None:
    """A repetition penalty below 1 multiplies positive logits: a third of a 400-token prompt then
    clears the top-k threshold, more overrides than the order-keeping drop takes (select_first's turn)."""
    rng = np.random.default_rng(17)
    rows, vocab = 3, 49152
    python, native = PythonSampler(), make_native()
    requests = {}
    for seq_id in range(rows):
        top_k = (50, 120, 300)[seq_id]
        request = SamplingParams(temperature=0.8, top_k=top_k, repetition_penalty=0.3, seed=70 + seq_id)
        prompt = rng.integers(0, vocab, size=400).tolist()
        register(python, native, requests, seq_id, request, prompt)
    for _ in range(3):
        logits = rng.standard_normal((rows, vocab)) * 2.5
        compare_step(python, native, logits.astype(np.float32), list(range(rows)), requests)


# -- twin against twin ---------------------------------------------------------------------------

params_strategy = st.builds(
    SamplingParams,
    temperature=st.sampled_from([0.0, 0.0, 0.3, 0.7, 1.0, 1.0, 1.5, 4.0]),
    top_k=st.sampled_from([0, 0, 1, 2, 5, 40, 300]),
    top_p=st.sampled_from([1.0, 1.0, 0.5, 0.9, 0.99]),
    min_p=st.sampled_from([0.0, 0.0, 0.05, 0.3]),
    repetition_penalty=st.sampled_from([1.0, 1.0, 0.8, 1.3]),
    frequency_penalty=st.sampled_from([0.0, 0.0, -0.5, 0.7]),
    presence_penalty=st.sampled_from([0.0, 0.0, 0.4, -1.2]),
    seed=st.integers(0, 2**64 - 1),
)


@st.composite
def logits_rows(draw: st.DrawFn, rows: int, vocab: int) -> np.ndarray:
    """Random float32 logits: a random scale, sometimes a few spikes, coarse values (ties), or -inf."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.01, 1.0, 3.0, 10.0, 40.0]))
    x = rng.standard_normal((rows, vocab)) * scale
    if draw(st.booleans()):
        spikes = rng.integers(0, vocab, size=(rows, 3))
        np.put_along_axis(x, spikes, rng.uniform(5, 15, size=(rows, 3)) * max(scale, 1.0), axis=1)
    if draw(st.booleans()):
        x = np.round(x * 2) / 2  # many exact ties
    if draw(st.booleans()) and vocab > 1:
        mask = rng.random((rows, vocab)) < 0.3
        mask[:, 0] = False  # keep a finite logit in every row
        x[mask] = -np.inf
    return x.astype(np.float32)


def register(
    python: PythonSampler,
    native: Sampler,
    requests: dict[int, tuple[SamplingParams, list[int], list[int]]],
    seq_id: int,
    params: SamplingParams,
    prompt: list[int],
) -> None:
    """Adds a sequence to both twins and to `requests`, the record compare_step checks a mismatch against."""
    requests[seq_id] = (params, prompt, [])
    python.add(seq_id, params, prompt)
    native.add(seq_id, params, prompt)


def compare_step(
    python: PythonSampler,
    native: Sampler,
    logits: np.ndarray,
    seq_ids: list[int],
    requests: dict[int, tuple[SamplingParams, list[int], list[int]]],
) -> None:
    """Both twins draw one step; a difference must be a near-tie of the reference."""
    expected = python.sample(torch.from_numpy(logits), seq_ids)
    got = native.sample(torch.from_numpy(logits), seq_ids)
    for row, seq_id in enumerate(seq_ids):
        if got[row] != expected[row]:
            params, prompt, output = requests[seq_id]
            x = penalized(logits[row], params, prompt, output)
            _, margin = reference_draw(x, params, uniform(params.seed or 0, len(output)))
            assert margin < NEAR_TIE, (
                f"row {row}: native {got[row]} != python {expected[row]} with no near-tie (margin {margin:.3g})"
            )
    for row, seq_id in enumerate(seq_ids):
        requests[seq_id][2].append(expected[row])


@requires_native
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_twins_draw_the_same_tokens(data: st.DataObject) -> None:
    # Not 1: the Python twin's top-p (numpy sort) fails on one-column rows (docs/twin-spec.md, Questions).
    vocab = data.draw(st.sampled_from([2, 7, 128, 129, 300, 700, 1500]), label="vocab")
    rows = data.draw(st.integers(1, 5), label="rows")
    python, native = PythonSampler(), make_native()
    requests: dict[int, tuple[SamplingParams, list[int], list[int]]] = {}
    for seq_id in range(rows):
        params = data.draw(params_strategy, label="params")
        prompt = data.draw(st.lists(st.integers(0, vocab - 1), max_size=12), label="prompt")
        register(python, native, requests, seq_id, params, prompt)
    for _ in range(data.draw(st.integers(1, 3), label="steps")):
        seq_ids = data.draw(st.permutations(list(range(rows))), label="order")
        compare_step(python, native, data.draw(logits_rows(rows, vocab), label="logits"), seq_ids, requests)


@pytest.fixture(params=["widest", "portable"])
def pass_f_build(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The fast softmax sum (pass F) as this machine's widest fused variant picks it, then as the portable
    build: both must hold the same bound, and a machine runs only one of them unless told."""
    if request.param == "widest":
        yield request.param
        return
    from infer_prof.native_paths.loader import require

    _, lib = require()
    lib.np_sampler_portable_pass_f(1)
    try:
        yield request.param
    finally:
        lib.np_sampler_portable_pass_f(0)


@requires_native
def test_the_pass_f_build_follows_the_cpu_and_the_switch() -> None:
    from pathlib import Path

    from infer_prof.native_paths.loader import require
    from infer_prof.native_paths.sampler import pass_f_variant

    flags = next(
        (
            line.split(":", 1)[1].split()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        ),
        [],
    )
    if not flags:
        pytest.skip("no /proc/cpuinfo flags to compare with")
    expected = (
        "AVX-512+FMA" if "avx512f" in flags else "AVX2+FMA" if {"avx2", "fma"} <= set(flags) else "portable"
    )
    assert pass_f_variant() == expected
    _, lib = require()
    lib.np_sampler_portable_pass_f(1)
    try:
        assert pass_f_variant() == "portable"
    finally:
        lib.np_sampler_portable_pass_f(0)
    assert pass_f_variant() == expected


@requires_native
@pytest.mark.parametrize("mix", ["greedy", "top_k", "top_p", "min_p", "full", "penalties", "mixed"])
def test_twins_agree_on_a_real_vocabulary(mix: str, pass_f_build: str) -> None:
    """49,152-token rows shaped like a language model's (a few strong candidates over a broad tail)."""
    rng = np.random.default_rng(sum(map(ord, mix)))
    rows, vocab = 6, 49152
    choices = {
        "greedy": [SamplingParams()],
        "top_k": [
            SamplingParams(temperature=0.8, top_k=50, top_p=0.9),
            SamplingParams(temperature=1.0, top_k=2000),
        ],
        "top_p": [SamplingParams(temperature=1.0, top_p=0.9), SamplingParams(temperature=2.0, top_p=0.5)],
        "min_p": [
            SamplingParams(temperature=1.0, min_p=0.05),
            SamplingParams(temperature=0.7, top_p=0.95, min_p=0.01),
        ],
        "full": [SamplingParams(temperature=1.0), SamplingParams(temperature=0.5)],
        "penalties": [
            SamplingParams(
                temperature=0.9,
                top_p=0.9,
                repetition_penalty=1.2,
                frequency_penalty=0.4,
                presence_penalty=0.3,
            )
        ],
    }
    everything = [p for options in choices.values() for p in options]
    python, native = PythonSampler(), make_native()
    requests = {}
    for seq_id in range(rows):
        options = everything if mix == "mixed" else choices[mix]
        base = options[seq_id % len(options)]
        params = SamplingParams(**{**{k: getattr(base, k) for k in base.__slots__}, "seed": 1000 + seq_id})
        prompt = rng.integers(0, vocab, size=200).tolist()
        register(python, native, requests, seq_id, params, prompt)
    for _ in range(4):
        logits = rng.standard_normal((rows, vocab)) * 2.5
        spikes = rng.integers(0, vocab, size=(rows, 6))
        np.put_along_axis(logits, spikes, rng.uniform(8, 16, size=(rows, 6)), axis=1)
        compare_step(python, native, logits.astype(np.float32), list(range(rows)), requests)


@requires_native
@pytest.mark.parametrize("top_p", [0.5, 1.0])
def test_twins_agree_when_a_penalty_over_a_tiny_temperature_leaves_the_largest_float_far_above_the_maximum(
    top_p: float, pass_f_build: str
) -> None:
    """Found by the fuzzer: at temperature 1e-30 a frequency penalty of 2 on the strongest token puts the
    largest float 2e30 above the softmax's maximum; the fast sum's scale exp(2e30) overflowed, Z came out
    NaN and the C sampler read before its candidate array. Every row must still draw what Python draws."""
    rng = np.random.default_rng(30)
    rows, vocab = 3, 177
    python, native = PythonSampler(), make_native()
    requests = {}
    for seq_id in range(rows):
        request = SamplingParams(
            temperature=1e-30,
            top_p=top_p,
            min_p=0.1 if seq_id == 1 else 0.0,
            frequency_penalty=2.0,
            repetition_penalty=3.0 if seq_id == 2 else 1.0,
            seed=11 + seq_id,
        )
        prompt = [7, 8, 9]
        register(python, native, requests, seq_id, request, prompt)
    for _ in range(4):
        logits = rng.uniform(-10.0, 10.0, (rows, vocab))
        logits[:, 7] = 12.0  # drawn first, then penalized: no longer the maximum, still the largest float
        compare_step(python, native, logits.astype(np.float32), list(range(rows)), requests)


@requires_native
@pytest.mark.parametrize("shape", ["rising", "masked_start", "tail_top", "penalized_top"])
def test_twins_agree_where_the_one_pass_softmax_sum_must_rescale(shape: str, pass_f_build: str) -> None:
    """Rows over several chunks of the fused pass A + F (32 blocks of 128) that take its rare turns: a
    maximum that grows chunk after chunk (each growth rescales the sums so far), a first chunk of
    -inf only, the largest float in the ragged tail past the last whole block, and a largest float
    that a penalty lowers (the pass's top then exceeds the softmax's maximum)."""
    rng = np.random.default_rng(sum(map(ord, shape)))
    rows, vocab = 4, 3 * 32 * 128 + 77
    params = [
        SamplingParams(temperature=1.0, top_p=0.9),
        SamplingParams(temperature=0.7),  # no top-p: the draw walks the per-block sums
        SamplingParams(temperature=1.5, top_p=0.99, min_p=0.01),
        SamplingParams(temperature=1.0, top_p=0.95, repetition_penalty=1.5, frequency_penalty=0.5),
    ]
    python, native = PythonSampler(), make_native()
    requests = {}
    for seq_id in range(rows):
        prompt = rng.integers(0, vocab, size=50).tolist()
        if shape == "penalized_top":
            prompt.append(vocab // 2)  # the spike below
        fields = {k: getattr(params[seq_id], k) for k in SamplingParams.__slots__}
        fields["seed"] = 77 + seq_id
        if shape == "penalized_top":
            fields["repetition_penalty"] = 3.0
        request = SamplingParams(**fields)
        register(python, native, requests, seq_id, request, prompt)
    for _ in range(3):
        logits = rng.standard_normal((rows, vocab)) * 2.0
        if shape == "rising":
            logits += np.linspace(0.0, 40.0, vocab)  # each chunk's maximum beats the last by ~13
        elif shape == "masked_start":
            logits[:, : 32 * 128 + 5] = -INF
        elif shape == "tail_top":
            logits[:, -30:] += 25.0
        else:
            logits[:, vocab // 2] = 30.0  # 30 / 3 after the penalty: below the next strongest tokens
            logits[:, 7] = 12.0
        compare_step(python, native, logits.astype(np.float32), list(range(rows)), requests)


def test_the_near_tie_reference_recognizes_an_exact_boundary() -> None:
    """The check that lets a mismatch pass must itself be able to say no."""
    x = np.array([0.0, 0.0, -INF, -INF])
    params = SamplingParams(temperature=1.0)
    assert reference_draw(x, params, 0.5) == (1, 0.0)  # cum 0.5 == target: on the boundary
    token, margin = reference_draw(x, params, 0.3)
    assert token == 0 and margin > NEAR_TIE


# -- the native adapter's own duties -------------------------------------------------------------


@requires_native
def test_adapter_validates_logits_and_prompts_before_calling_c() -> None:
    sampler = make_native()
    sampler.add(1, SamplingParams(), [])
    with pytest.raises(ValueError, match="float32"):
        sampler.sample(torch.zeros(1, 4, dtype=torch.float64), [1])
    with pytest.raises(ValueError, match="contiguous"):
        sampler.sample(torch.zeros(4, 2).t(), [1, 1])
    with pytest.raises(ValueError, match="shape"):
        sampler.sample(torch.zeros(4), [1])
    with pytest.raises(ValueError, match="NaN"):
        sampler.sample(torch.tensor([[0.0, float("nan")]]), [1])
    with pytest.raises(ValueError, match=">= 0"):
        sampler.add(2, SamplingParams(repetition_penalty=1.1), [3, -1])
    sampler.add(3, SamplingParams(repetition_penalty=1.1), [10])
    with pytest.raises(ValueError, match="vocabulary"):
        sampler.sample(torch.zeros(1, 8), [3])
    assert sampler.sample(np.zeros((1, 4), dtype=np.float32), [1]) == [0]  # numpy works too
    logits = torch.randn(2, 300)
    before = logits.clone()
    sampler.sample(logits, [1, 1])
    assert torch.equal(logits, before)  # read in place, never written


@requires_native
def test_native_memory_is_freed() -> None:
    from infer_prof.native_paths.loader import require

    _, lib = require()
    gc.collect()
    baseline = lib.np_live_allocations()
    sampler = make_native()
    for seq_id in range(20):
        sampler.add(
            seq_id, SamplingParams(temperature=1.0, repetition_penalty=1.2, frequency_penalty=0.1), [1, 2, 3]
        )
    for step in range(5):
        sampler.sample(torch.randn(20 - step, 1000), list(range(step, 20)))
        sampler.remove(step)
    assert len(sampler) == 15 and lib.np_live_allocations() > baseline
    sampler.close()
    assert lib.np_live_allocations() == baseline


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("top_k", 2**31),
        ("top_k", 10**20),
        ("max_tokens", 2**31),
        ("seed", -1),
        ("seed", 2**64),
        ("temperature", float("nan")),
    ],
)
def test_one_sampling_domain_guards_both_twins(field: str, value: object) -> None:
    """Values the C twin's fields cannot hold are refused when the parameters are made, so neither twin
    ever sees them (before, top_k 1e20 ran in Python and overflowed in C)."""
    from infer_prof.engine.types import SamplingParams
    from infer_prof.errors import InvalidSamplingParams

    with pytest.raises(InvalidSamplingParams, match=field):
        SamplingParams(**{field: value})
    edge = {"top_k": 2**31 - 1, "max_tokens": 2**31 - 1, "seed": 2**64 - 1, "temperature": 1e30}[field]
    assert getattr(SamplingParams(**{field: edge}), field) == edge
