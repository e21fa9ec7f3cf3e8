"""The sampler swap (profiler/inject/vllm_sampler_swap.py) against a fake of vLLM's sampler module: what it takes, what it hands back, seeds, counts, files, and the draws' distribution; no vLLM needed."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from infer_prof.profiler.checks.sampler_distribution import chi_square, truncated_softmax
from tests.native_paths.support import requires_native

SOURCE = Path(__file__).resolve().parents[3] / "profiler" / "inject" / "vllm_sampler_swap.py"
VOCAB = 64


def load_swap() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_sampler_swap_under_test", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


swap_module = load_swap()


def fake_vllm(
    version: str = "0.32.0", parameters: str = "self, logits, generators, k, p"
) -> types.ModuleType:
    """vLLM's sampler module as far as the swap reads it: TopKTopPSampler binding forward_cpu in __init__."""
    module = types.ModuleType(swap_module.MODULE)
    module.calls = []  # type: ignore[attr-defined]
    namespace: dict[str, object] = {"calls": module.calls, "torch": torch}
    exec(  # a function of the signature under test
        f"def forward_cpu({parameters}):\n"
        "    calls.append(logits.shape[0])\n"
        "    return torch.full((logits.shape[0],), -1, dtype=torch.long), None\n",
        namespace,
    )

    class TopKTopPSampler:
        def __init__(self, logprobs_mode: str = "raw_logprobs", use_fp64_gumbel: bool = False) -> None:
            self.logprobs_mode = logprobs_mode
            self.use_fp64_gumbel = use_fp64_gumbel
            self.forward = self.forward_cpu

    TopKTopPSampler.forward_cpu = namespace["forward_cpu"]  # type: ignore[attr-defined]
    module.TopKTopPSampler = TopKTopPSampler  # type: ignore[attr-defined]
    return module


@pytest.fixture
def library() -> str:
    from infer_prof.native_paths import loader

    module = loader.extension()
    if module is None or not hasattr(module.lib, swap_module.SYMBOL):
        pytest.skip("the C extension with np_sampler_draw_rows is not built")
    return str(module.__file__)


def swapped(tmp_path: Path, library: str, monkeypatch, version: str = "0.32.0", **fake):  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__=version))
    module = fake_vllm(version, **fake)
    switch = bytearray(b"S")
    swap = swap_module.Swap({"library": library}, str(tmp_path), switch)
    swap.on_import(module)
    return swap, module, switch


def batch(rows: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, VOCAB, generator=torch.Generator().manual_seed(seed)) * 2


@requires_native
def test_the_c_sampler_draws_inside_top_k_and_leaves_the_logits_as_they_were(
    tmp_path, library, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    swap, module, _switch = swapped(tmp_path, library, monkeypatch)
    assert swap.swapped and swap.why == ""
    sampler = module.TopKTopPSampler()
    logits = batch()
    before = logits.clone()
    k = torch.tensor([1, 3, VOCAB, 5], dtype=torch.int32)
    tokens, returned = sampler.forward(logits, {}, k, None)
    assert returned is None and module.calls == []  # vLLM's own function was not called
    assert torch.equal(logits, before)
    assert tokens[0] == int(logits[0].argmax())  # top-k 1 is the best token
    assert int(tokens[1]) in set(logits[1].topk(3).indices.tolist())
    assert int(tokens[3]) in set(logits[3].topk(5).indices.tolist())
    assert swap.rows[swap_module.SWAPPED] == 4 and swap.calls[swap_module.SWAPPED] == 1


@requires_native
def test_every_other_case_goes_back_to_vllm_and_is_counted(tmp_path, library, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    swap, module, switch = swapped(tmp_path, library, monkeypatch)
    p = torch.full((3,), 0.9)
    cases = [
        (module.TopKTopPSampler("processed_logprobs"), batch(3), p, swap_module.PROCESSED),
        (module.TopKTopPSampler("processed_logits"), batch(3), p, swap_module.PROCESSED),
        (module.TopKTopPSampler("a mode of a later vLLM"), batch(3), p, swap_module.PROCESSED),
        (module.TopKTopPSampler(use_fp64_gumbel=True), batch(3), p, swap_module.FP64),
        (module.TopKTopPSampler(), batch(3), None, swap_module.NO_FILTER),
        (module.TopKTopPSampler(), batch(3).double(), p, swap_module.LAYOUT),
        (module.TopKTopPSampler(), batch(6)[::2], p, swap_module.LAYOUT),  # not in one piece
    ]
    for sampler, logits, top_p, path in cases:
        before = swap.rows[path]
        tokens, _ = sampler.forward(logits, {}, None, top_p)
        assert tokens.tolist() == [-1] * 3  # vLLM's (the fake's) answer
        assert swap.rows[path] == before + 3
    nan = batch(3)
    nan[1, 0] = float("nan")
    module.TopKTopPSampler().forward(nan, {}, None, p)
    assert swap.rows[swap_module.REFUSED] == 3
    switch[0] = ord("1")  # the A/B's turn without the swap
    module.TopKTopPSampler().forward(batch(3), {}, None, p)
    assert swap.rows[swap_module.OFF_TURN] == 3
    assert swap.rows[swap_module.SWAPPED] == 0
    assert len(module.calls) == len(cases) + 2


@requires_native
def test_seeded_rows_repeat_and_advance_their_generators_as_vllm_does(tmp_path, library, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _swap, module, _switch = swapped(tmp_path, library, monkeypatch)
    sampler = module.TopKTopPSampler()
    p = torch.full((4,), 0.95)

    def run() -> tuple[list[list[int]], torch.Generator]:
        generators = {1: torch.Generator().manual_seed(42), 3: torch.Generator().manual_seed(7)}
        seen = [sampler.forward(batch(4), generators, None, p)[0].tolist() for _ in range(5)]
        return seen, generators[1]

    first, generator = run()
    second, _ = run()
    assert [row[1] for row in first] == [row[1] for row in second]
    assert [row[3] for row in first] == [row[3] for row in second]
    expected = torch.Generator().manual_seed(42)
    for _ in range(5):  # one torch.randint(0, 2**31) a step, as vLLM's forward_cpu draws its seed
        torch.randint(0, 2**31, (1,), generator=expected, dtype=torch.long)
    assert torch.equal(generator.get_state(), expected.get_state())


@requires_native
def test_the_swap_draws_from_the_truncated_softmax(tmp_path, library, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _swap, module, _switch = swapped(tmp_path, library, monkeypatch)
    sampler = module.TopKTopPSampler()
    row = torch.tensor(np.linspace(2.0, -4.0, VOCAB) + np.cos(np.arange(VOCAB)), dtype=torch.float32)
    torch.manual_seed(1234)  # the unseeded rows' seeds come from torch's global generator, as in vLLM
    draws = 4_000
    k, p = 12, 0.85
    tokens = sampler.forward(
        row.repeat(draws, 1), {}, torch.full((draws,), k, dtype=torch.int32), torch.full((draws,), p)
    )[0]
    exact = truncated_softmax(row.double().numpy(), k, float(torch.tensor(p, dtype=torch.float32)))
    test = chi_square(tokens.numpy(), exact)
    assert test.outside == 0 and test.p_value > 1e-3, test


@requires_native
def test_its_files_hold_every_call_and_the_counts(tmp_path, library, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    swap, module, switch = swapped(tmp_path, library, monkeypatch)
    sampler = module.TopKTopPSampler()
    sampler.forward(batch(4), {}, None, torch.full((4,), 0.9))
    switch[0] = ord("1")
    sampler.forward(batch(2), {}, None, torch.full((2,), 0.9))
    swap.flush()
    status = json.loads((tmp_path / f"swap-{os.getpid()}.json").read_text())
    assert status["swapped"] and status["version"] == "0.32.0"
    assert status["rows"]["swapped"] == 4 and status["rows"]["off turn"] == 2
    lines = [line.split("\t") for line in (tmp_path / f"swap-{os.getpid()}.tsv").read_text().splitlines()]
    assert [(int(rows), int(path)) for _start, _end, rows, path in lines] == [(4, 0), (2, 1)]
    assert all(int(start) <= int(end) for start, end, _rows, _path in lines)


@pytest.mark.parametrize(
    ("version", "parameters", "why"),
    [
        ("0.99.0", "self, logits, generators, k, p", "vLLM 0.99.0 is not one the sampler swap knows"),
        ("0.32.0", "self, logits, generators, k, p, extra=None", "does not take"),
    ],
)
def test_an_engine_it_does_not_know_keeps_its_own_function(
    tmp_path, monkeypatch, version, parameters, why
) -> None:  # type: ignore[no-untyped-def]
    swap, module, _switch = swapped(tmp_path, "/nonexistent", monkeypatch, version, parameters=parameters)
    assert not swap.swapped and why in swap.why
    module.TopKTopPSampler().forward(batch(2), {}, None, None)
    assert module.calls == [2]
    assert json.loads((tmp_path / f"swap-{os.getpid()}.json").read_text())["why"] == swap.why


def test_a_library_it_cannot_load_keeps_vllms_function(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    swap, module, _switch = swapped(tmp_path, str(tmp_path / "missing.so"), monkeypatch)
    assert not swap.swapped and "could not be loaded" in swap.why
    assert module.TopKTopPSampler.forward_cpu.__name__ == "forward_cpu"
    assert not hasattr(module.TopKTopPSampler.forward_cpu, "__wrapped__")
