"""The top frames and the flame graph name the forward pass as the time split does: whole, when no native stack can split it."""

from __future__ import annotations

from infer_prof.reports.run.frames import MODEL_WHOLE, top_frames_table
from infer_prof.reports.stacks import SampledStack, StackFrame, ThreadGroup

RUN_LAYERS = StackFrame("LlamaModel.run_layers", "engine/llama.py", 364)
CALL = StackFrame("OpOverloadPacket.__call__", "torch/_ops.py", 1279)
TOP_P = StackFrame("_top_p_keep", "engine/sampler.py", 334)
SGEMM = StackFrame("mkl_blas_sgemm", "libtorch_cpu.so")


def _group(*stacks: tuple[tuple[StackFrame, ...], int, str]) -> ThreadGroup:
    return ThreadGroup(
        "infer-prof-engine",
        {1},
        [
            SampledStack(1, "infer-prof-engine", frames, count, "interpreter", component)
            for frames, count, component in stacks
        ],
        engine=True,
    )


def _labels(group: ThreadGroup) -> list[str]:
    return [row[0] for row in top_frames_table(group).rows if row[0]]


def test_python_only_samples_of_the_forward_read_as_the_model_whole() -> None:
    group = _group(((RUN_LAYERS, CALL), 85, "model_glue"), ((TOP_P,), 15, "sampler"))
    assert _labels(group) == [f"{MODEL_WHOLE} (85%)", "sampler (15%)"]
    assert "no native stacks" in (top_frames_table(group).note or "")


def test_with_native_stacks_glue_and_kernels_keep_their_own_rows() -> None:
    group = _group(((RUN_LAYERS, CALL), 20, "model_glue"), ((RUN_LAYERS, CALL, SGEMM), 65, "model_kernels"))
    assert _labels(group) == ["model_kernels (76%)", "model_glue (24%)"]


def test_the_flame_graph_colours_python_only_forward_samples_as_the_model_whole() -> None:
    from infer_prof.reports.run.flamegraph import build_tree, group_components
    from infer_prof.reports.stacks import python_only

    python = _group(((RUN_LAYERS, CALL), 85, "model_glue"), ((TOP_P,), 15, "sampler"))
    assert python_only([python]) and group_components([python]) == {"model": 85, "sampler": 15}
    assert build_tree(python.stacks, whole_model=True).children[RUN_LAYERS].component == "model"
    native = _group(((RUN_LAYERS, CALL, SGEMM), 65, "model_kernels"), ((TOP_P,), 15, "sampler"))
    assert group_components([native]) == {"model_kernels": 65, "sampler": 15}
