"""Device selection: --device specs resolved against a machine's CUDA devices (faked here), and the default dtype."""

from __future__ import annotations

import pytest

from infer_prof.engine.device import default_dtype, resolve_device, resolve_dtype_name
from infer_prof.errors import OptionError


def no_gpu() -> int:
    return 0


def two_gpus() -> int:
    return 2


@pytest.mark.parametrize(
    ("spec", "count", "expected"),
    [
        ("cpu", no_gpu, "cpu"),
        ("auto", no_gpu, "cpu"),
        ("auto", two_gpus, "cuda:0"),
        ("cuda", two_gpus, "cuda:0"),
        ("cuda:1", two_gpus, "cuda:1"),
        (" CUDA:1 ", two_gpus, "cuda:1"),
        ("cpu", two_gpus, "cpu"),
    ],
)
def test_a_spec_resolves_to_the_device_the_engine_will_use(spec, count, expected) -> None:  # type: ignore[no-untyped-def]
    assert resolve_device(spec, cuda_count=count) == expected


def test_cpu_never_asks_for_cuda() -> None:
    def forbidden() -> int:
        raise AssertionError("cpu must not probe CUDA")

    assert resolve_device("cpu", cuda_count=forbidden) == "cpu"


@pytest.mark.parametrize("spec", ["tpu", "cuda:x", "cpu:1", "auto:0", "", "cuda:-1", "cuda:12345", None])
def test_a_malformed_spec_names_the_flag_and_the_choices(spec) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OptionError, match=r"--device=.*use auto, cpu, cuda or cuda:N"):
        resolve_device(spec, cuda_count=two_gpus)


def test_cuda_without_a_gpu_is_refused_with_the_fix() -> None:
    with pytest.raises(OptionError) as caught:
        resolve_device("cuda", cuda_count=no_gpu)
    message = str(caught.value)
    assert "\n" not in message and "no CUDA device" in message and "--device cpu" in message


def test_an_index_past_the_last_gpu_lists_the_ones_there_are() -> None:
    with pytest.raises(OptionError, match=r"2 CUDA device\(s\), cuda:0 to cuda:1"):
        resolve_device("cuda:2", cuda_count=two_gpus)


def test_bfloat16_is_the_gpu_default_and_float32_the_cpu_one() -> None:
    assert default_dtype("cuda:0") == "bfloat16" and default_dtype("cpu") == "float32"
    assert (
        resolve_dtype_name("auto", "cuda:1") == "bfloat16" and resolve_dtype_name("auto", "cpu") == "float32"
    )
    assert resolve_dtype_name("float32", "cuda:0") == "float32"  # an explicit dtype is kept


def test_a_model_on_a_gpu_takes_cudnn_out_of_the_attention_backends() -> None:
    import torch

    from infer_prof.engine.device import avoid_attention_plan_builds

    was = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        avoid_attention_plan_builds()
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)
