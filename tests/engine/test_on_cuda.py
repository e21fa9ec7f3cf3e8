"""The engine on a CUDA device against itself on the CPU: logits, greedy tokens, sampler twins, graphs and events.

Every test here needs a GPU and skips with that reason without one (the CPU suite covers the same
logic with fakes: test_cuda_graphs, test_device_time). benchmarks/gpu_check.py runs the end-to-end check.
"""

from __future__ import annotations

import pytest
import torch

from infer_prof.engine.config import EngineConfig, python_components
from infer_prof.engine.cuda_graphs import DecodeGraphs
from infer_prof.engine.engine import Engine
from infer_prof.engine.llama import LlamaModel
from infer_prof.engine.loader import synthetic_weights
from infer_prof.engine.model_runner import build_model_input
from infer_prof.engine.sampler import PythonSampler
from infer_prof.engine.tokenizer import Tokenizer
from infer_prof.engine.types import ModelConfig, SamplingParams

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="these tests run the engine on a CUDA GPU"
)

CONFIG = ModelConfig(
    "test", vocab_size=300, dim=64, n_layers=2, n_heads=8, n_kv_heads=2, hidden_dim=96, context_length=256
)
BLOCK = 4


def _model(device: str, graphs: bool = False) -> LlamaModel:
    model = LlamaModel(CONFIG, synthetic_weights(CONFIG, seed=5), device=device)
    if graphs:
        model.graphs = DecodeGraphs(model, max_batch=8, max_blocks=CONFIG.context_length // BLOCK)
    model.allocate_kv_cache(40, BLOCK)
    return model


def test_the_forward_on_the_gpu_matches_the_cpu() -> None:
    cpu, gpu = _model("cpu"), _model("cuda")
    step = build_model_input([[5, 6, 7, 8], [9]], [0, 0], [True, True], [[0, 1], [2, 3]], BLOCK)
    expected, got = cpu.forward(step), gpu.forward(step)
    assert got.device.type == "cuda"
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_captured_graphs_replay_the_eager_decode_steps() -> None:
    eager, graphed = _model("cuda"), _model("cuda", graphs=True)
    prompts, tables = [[5, 6, 7], [8, 9, 10, 11, 12]], [[0, 1, 2, 3], [4, 5, 6, 7]]
    prefill = build_model_input(prompts, [0, 0], [True, True], tables, BLOCK)
    for model in (eager, graphed):
        model.forward(prefill)
    lengths = [3, 5]
    for step in range(6):
        decode = build_model_input([[20 + step], [30 + step]], lengths, [True, True], tables, BLOCK)
        torch.testing.assert_close(graphed.forward(decode), eager.forward(decode), rtol=1e-4, atol=1e-4)
        lengths = [n + 1 for n in lengths]
    stats = graphed.graphs.stats
    assert stats.captures >= 1 and stats.replayed_steps == 6


def test_the_python_sampler_on_the_gpu_draws_the_cpus_tokens() -> None:
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 300, generator=generator) * 3
    params = [
        SamplingParams(),
        SamplingParams(temperature=0.8, seed=1),
        SamplingParams(top_k=20, seed=2),
        SamplingParams(top_p=0.9, seed=3),
        SamplingParams(min_p=0.05, seed=4),
        SamplingParams(repetition_penalty=1.3, frequency_penalty=0.5, seed=5),
    ]
    picks = []
    for device in ("cpu", "cuda"):
        sampler = PythonSampler()
        for seq_id, param in enumerate(params):
            sampler.add(seq_id, param, [1, 2, 3])
        picks.append([sampler.sample(logits.to(device), list(range(6))) for _ in range(4)])
    assert picks[0] == picks[1]  # random logits: no near-tie at this scale


@pytest.mark.parametrize("graphs", [False, True])
def test_an_engine_on_the_gpu_gives_the_cpus_greedy_tokens(graphs: bool) -> None:
    outputs = []
    for device in ("cpu", "cuda"):
        model = LlamaModel(CONFIG, synthetic_weights(CONFIG, seed=9), device=device)
        if graphs and device == "cuda":
            model.graphs = DecodeGraphs(model, max_batch=4, max_blocks=CONFIG.context_length // BLOCK)
        config = EngineConfig(block_size=BLOCK, max_batch=4, max_batched_tokens=64, kv_blocks=64)
        scheduler, kv_alloc, sampler = python_components(config, model)
        engine = Engine(
            model,
            Tokenizer.byte_level(CONFIG.vocab_size),
            scheduler=scheduler,
            kv_alloc=kv_alloc,
            sampler=sampler,
            config=config,
        )
        with engine:
            handles = [
                engine.submit([3 + i, 4 + i, 5 + i, 6], SamplingParams(max_tokens=12, ignore_eos=True))
                for i in range(6)
            ]
            outputs.append([handle.result(timeout=120).token_ids for handle in handles])
    assert outputs[0] == outputs[1]


def test_cuda_event_pairs_time_device_work() -> None:
    from infer_prof.profiler.collectors.device_time import DeviceTimeCollector
    from infer_prof.profiler.collectors.spans import RecordingTracer

    tracer = RecordingTracer()
    timer = DeviceTimeCollector(tracer=tracer, device="cuda:0")
    timer.start()
    a = torch.randn(4096, 4096, device="cuda")
    with tracer.span("step"), tracer.span("model"):
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()
    timer.stop()
    ((host_ns, elapsed_ns),) = timer.pairs()
    assert elapsed_ns > 1_000_000  # 20 matmuls of 4096^2 take milliseconds on any GPU


def test_a_model_on_the_gpu_runs_attention_without_cudnn() -> None:
    _model("cuda")
    assert not torch.backends.cuda.cudnn_sdp_enabled()  # plans per new shape cost hundreds of ms a step
