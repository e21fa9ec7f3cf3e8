"""The C block-quantized linear against its Python twin: the same sums for any shape, both bit widths, one
thread or torch's two, vector or portable loop; bad calls refused; a q4_1 model the same either way."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from infer_prof.engine.blockquant import block_linear_reference, pack, unpack
from infer_prof.engine.llama import LlamaModel
from infer_prof.engine.loader import synthetic_weights
from infer_prof.engine.types import ModelKernels
from tests.engine.test_quantize import CONFIG, all_logits
from tests.native_paths.support import FUZZ_EXAMPLES, requires_native

pytestmark = requires_native


def native_call(packed, bits, out, width, x, threads=1, simd=2, rows=None):
    """np_block_linear's status and output, called directly (the adapter always asks for the best loop)."""
    from infer_prof.native_paths.block_linear import kernel
    from infer_prof.native_paths.loader import require

    kernel()  # binds torch's OpenMP runtime
    ffi, lib = require()
    rows = x.shape[0] if rows is None else rows
    y = torch.full((x.shape[0], max(out, 1)), float("nan"))  # a refused call must not write even this
    status = lib.np_block_linear(
        ffi.cast("uint8_t *", packed.data_ptr()),
        bits,
        out,
        width,
        ffi.cast("float *", x.data_ptr()),
        rows,
        ffi.cast("float *", y.data_ptr()),
        threads,
        simd,
    )
    return status, y


def tolerance(packed, bits, out, width, x):
    """Float rounding bound of a sum in another order: a few ulps of the sum of the magnitudes of the terms the
    kernel adds, |x| times each weight's scaled level |d q| and (4 bits) its block's minimum |m| apart. A weight
    near 0 is the sum of two large parts that cancel (d q = -m), so |x| @ |w| is no bound for q4_1."""
    q, d, m = unpack(packed, bits, out)
    parts = (q.float().abs() * d.abs()[..., None] + m.abs()[..., None]).reshape(out, -1)[:, :width]
    return 1e-5 * (x.abs() @ parts.t()) + 1e-6


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(
    bits=st.sampled_from([4, 8]),
    out=st.integers(1, 41),
    width=st.integers(1, 150),
    rows=st.integers(1, 11),
    threads=st.integers(1, 3),
    simd=st.sampled_from([0, 1, 2]),
    seed=st.integers(0, 2**31),
    scale=st.sampled_from([1e-3, 1.0, 300.0]),
)
# An activation landing exactly half-way between two 8-bit steps (row 5, 60.5): the twin once computed
# 127 / amax as a reciprocal times 127, one bit off the C kernel's division, and rounded it the other way.
@example(bits=4, out=9, width=30, rows=6, threads=1, simd=0, seed=171, scale=1.0)
# One non-zero activation (463.5) against a q4_1 row whose weight there is near 0: the scaled level's term and
# the minimum's, each of order 1e5, cancel, and the one-ulp (0.0156) rounding of either is far above a tolerance
# taken from |x| @ |w| (found by .ci/sanitize's 400 examples); the tolerance now takes the terms apart.
@example(bits=4, out=33, width=6, rows=1, threads=1, simd=2, seed=6, scale=300.0)
def test_the_c_kernel_gives_the_twins_sums(bits, out, width, rows, threads, simd, seed, scale) -> None:
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(out, width, generator=g) * scale
    x = torch.randn(rows, width, generator=g) * scale
    x[0, : min(width, 5)] = 0.0  # a block with zeros in it (and, for narrow inputs, a zero row's block)
    packed = pack(weight, bits)
    status, got = native_call(packed, bits, out, width, x, threads, simd)
    assert status == 0
    want = block_linear_reference(packed, bits, out, width, x)
    assert torch.all((got - want).abs() <= tolerance(packed, bits, out, width, x))


@pytest.mark.parametrize("bits", [4, 8])
def test_a_row_gets_the_same_bits_in_any_batch(bits: int) -> None:
    """Rows go through the four-row and the one-row loops alike, so a sequence's logits do not depend on
    what else is in its step."""
    g = torch.Generator().manual_seed(9)
    packed, x = pack(torch.randn(36, 200, generator=g), bits), torch.randn(7, 200, generator=g)
    for level in (0, 1, 2):
        batch = native_call(packed, bits, 36, 200, x, simd=level)[1]
        for row in range(7):
            alone = native_call(packed, bits, 36, 200, x[row : row + 1].contiguous(), simd=level)[1]
            assert torch.equal(alone[0], batch[row])


@pytest.mark.parametrize("bits", [4, 8])
def test_threads_split_rows_without_changing_a_bit(bits: int) -> None:
    g = torch.Generator().manual_seed(7)
    packed, x = pack(torch.randn(203, 96, generator=g), bits), torch.randn(6, 96, generator=g)
    outputs = [native_call(packed, bits, 203, 96, x, threads)[1] for threads in (1, 2, 4)]
    assert torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[0], outputs[2])


@pytest.mark.parametrize("bits", [4, 8])
def test_every_vector_level_agrees_with_the_portable_loop(bits: int) -> None:
    """Levels this CPU lacks fall back to the best one it has, so all three always run."""
    g = torch.Generator().manual_seed(8)
    packed, x = pack(torch.randn(64, 576, generator=g), bits), torch.randn(9, 576, generator=g)
    portable = native_call(packed, bits, 64, 576, x, simd=0)[1]
    for level in (1, 2):
        vector = native_call(packed, bits, 64, 576, x, simd=level)[1]
        assert torch.all((vector - portable).abs() <= tolerance(packed, bits, 64, 576, x))


def test_x86_gets_a_vector_loop() -> None:
    import platform

    from infer_prof.native_paths.loader import require

    _, lib = require()
    if platform.machine() != "x86_64":
        pytest.skip("the vector loops are x86's")
    assert lib.np_block_simd() >= 1


@pytest.mark.parametrize(
    "bits, out, width, rows, threads",
    [
        (5, 4, 32, 1, 1),
        (4, 0, 32, 1, 1),
        (4, 4, 0, 1, 1),
        (4, 4, 32, 0, 1),
        (8, 4, 32, 1, 0),
        (4, -4, 32, 1, 1),
    ],
)
def test_bad_calls_are_refused_without_touching_the_output(bits, out, width, rows, threads) -> None:
    from infer_prof.native_paths.loader import require

    _, lib = require()
    packed, x = pack(torch.randn(4, 32), 4), torch.randn(1, 32)
    before = lib.np_live_allocations()
    status, y = native_call(packed, bits, out, width, x, threads, rows=rows)
    assert status == lib.NP_ERR_ARG
    assert torch.isnan(y).all()
    assert lib.np_live_allocations() == before


def test_the_adapter_raises_on_a_refused_call_and_frees_its_scratch() -> None:
    from infer_prof.native_paths.block_linear import kernel
    from infer_prof.native_paths.loader import require

    _, lib = require()
    run, packed = kernel(), pack(torch.randn(4, 32), 4)
    before = lib.np_live_allocations()
    assert run(packed, 4, 4, 32, torch.ones(3, 32)).shape == (3, 4)
    with pytest.raises(ValueError, match="6-bit linear refused"):
        run(packed, 6, 4, 32, torch.ones(1, 32))
    assert lib.np_live_allocations() == before


def test_the_adapter_takes_strided_and_double_inputs() -> None:
    from infer_prof.native_paths.block_linear import kernel

    run, packed = kernel(), pack(torch.randn(8, 64), 4)
    wide = torch.randn(3, 128)
    strided, dense = wide[:, ::2], wide[:, ::2].contiguous()
    assert torch.equal(run(packed, 4, 8, 64, strided), run(packed, 4, 8, 64, dense))
    assert torch.equal(run(packed, 4, 8, 64, dense.double()), run(packed, 4, 8, 64, dense))


def test_a_q4_model_on_the_c_kernel_gives_its_twins_logits() -> None:
    from infer_prof.native_paths.block_linear import kernel

    weights = synthetic_weights(CONFIG, seed=3)
    twin = LlamaModel(CONFIG, weights, dtype="q4_1")
    native = LlamaModel(CONFIG, weights, dtype="q4_1", kernels=ModelKernels(block_linear=kernel()))
    ids = [
        int(t) for t in torch.randint(0, CONFIG.vocab_size, (40,), generator=torch.Generator().manual_seed(4))
    ]
    want, got = all_logits(twin, ids), all_logits(native, ids)
    # A rounding difference of one ulp can move an activation across an 8-bit step in the next layer, so
    # the models agree closely rather than exactly; random logits have near-ties a step can flip.
    assert float((got - want).abs().max()) < 0.05 * float(want.abs().max())
    assert float((got.argmax(-1) == want.argmax(-1)).float().mean()) >= 0.9


def test_the_kernel_says_what_runs_it() -> None:
    from infer_prof.native_paths.block_linear import VECTOR_LOOPS, describe, kernel
    from infer_prof.native_paths.loader import require

    kernel()
    figures = describe()
    assert figures["vector_loop"] == VECTOR_LOOPS[int(require()[1].np_block_simd())]
    assert figures["threads"].startswith(("torch's OpenMP threads", "one thread"))


def test_torchs_libgomp_is_preferred_to_another_one(tmp_path) -> None:
    from infer_prof.native_paths.openmp import loaded_libgomp

    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0\n"
        "7f02-7f03 r-xp 0 08:01 2 /venv/site-packages/torch/lib/libgomp-a34b3233.so.1\n"
        "7f04-7f05 rw-p 0 00:00 0\n"
    )
    assert loaded_libgomp(maps, prefer="/venv/site-packages/torch") == (
        "/venv/site-packages/torch/lib/libgomp-a34b3233.so.1"
    )
    assert loaded_libgomp(maps) == "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0"
    maps.write_text("7f04-7f05 rw-p 0 00:00 0\n")
    assert loaded_libgomp(maps) is None
    assert loaded_libgomp(tmp_path / "absent") is None


def test_q4_needs_the_library_and_says_how_to_build_it(monkeypatch) -> None:
    """No Python stand-in is fast enough to run in the kernel's place: the option is refused before loading."""
    from infer_prof.errors import NativeUnavailableError
    from infer_prof.native_paths import loader
    from infer_prof.profiler.session.options import EngineOptions

    assert EngineOptions(model="synthetic:tiny", dtype="q4_1").dtype == "q4_1"
    monkeypatch.setattr(loader, "extension", lambda: None)
    monkeypatch.setattr(loader, "_failure", "no library here")
    with pytest.raises(NativeUnavailableError, match="--dtype q4_1 needs the C library: no library here"):
        EngineOptions(model="synthetic:tiny", dtype="q4_1")

    class Stale:
        lib = object()
        __file__ = "/old/_native.so"

    monkeypatch.setattr(loader, "extension", lambda: Stale)
    with pytest.raises(
        NativeUnavailableError,
        match="lacks np_block_linear, np_decode_attention, np_decode_layers; rebuild it",
    ):
        EngineOptions(model="synthetic:tiny", dtype="q4_1")


def test_generate_runs_a_q4_model_through_the_c_kernel() -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "infer_prof.cli", "generate", "-m", "synthetic:tiny"]
        + ["--dtype", "q4_1", "-n", "4", "-t", "0", "--json", "hi"],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-500:]
    result = json.loads(done.stdout.splitlines()[0])
    assert len(result["token_ids"]) == 4 and result["error"] is None


def test_torch_profiler_sees_the_kernel_as_an_op() -> None:
    """Else a profile window would count the kernel's time as the Python between the model's ops."""
    from infer_prof.native_paths.block_linear import OP_NAME, kernel

    run, packed, x = kernel(), pack(torch.randn(64, 64), 4), torch.randn(2, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        run(packed, 4, 64, 64, x)
        run(packed, 4, 64, 64, x)
    assert [event.name for event in profile.events()].count(OP_NAME) == 2
