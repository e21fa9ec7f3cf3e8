"""The seeded request stream of a scenario: plain request specs (arrival time, prompt, lengths, sampling)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .arrivals import arrival_offsets, arrivals_within
from .prompts import read_prompt_file, synthetic_prompt
from .sampling import SamplingDict
from .spec import ScenarioSpec

_MAX_SEED = 2**63 - 1  # per-request sampling seeds fit a signed 64-bit integer on both twins


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of the load, before it meets an engine."""

    index: int
    arrival_s: float  # offset from the start of the measured load (open loop); 0 in closed loop and warmup
    prompt_tokens: int  # synthetic: trim the text to exactly this; file prompt: cut to at most this
    prompt_text: str | None  # a prompt-file line, or None for synthetic text (see prompt_text_for)
    max_tokens: int
    sampling: SamplingDict  # engine.types.SamplingParams field values, with seed and max_tokens
    priority: int = 0
    chat: bool = False  # wrap the prompt in the model's chat template
    warmup: bool = False  # run before the measured load; excluded from metrics


def generate_requests(spec: ScenarioSpec, context_length: int) -> list[RequestSpec]:
    """Every request of the scenario (warmup first), the same list for the same seed and context."""
    spec.validate_against_context(context_length)
    # Independent streams per aspect, so that e.g. adding a sampling-mix class leaves arrivals unchanged.
    arrival_rng, class_rng, length_rng, seed_rng, prompt_rng = (
        np.random.default_rng(child) for child in np.random.SeedSequence(spec.seed).spawn(5)
    )
    if spec.mode == "closed-loop":
        measured = np.zeros(spec.num_requests)  # type: ignore[arg-type]
    elif spec.num_requests is not None:
        measured = arrival_offsets(spec.num_requests, spec.rate, spec.burstiness, arrival_rng)  # type: ignore[arg-type]
    else:
        measured = arrivals_within(spec.duration_s, spec.rate, spec.burstiness, arrival_rng)  # type: ignore[arg-type]
    arrivals = np.concatenate((np.zeros(spec.warmup_requests), measured))
    total = len(arrivals)

    classes = spec.classes()
    weights = np.array([request_class.weight for request_class in classes], dtype=np.float64)
    class_of = class_rng.choice(len(classes), size=total, p=weights / weights.sum())
    prompt_lengths = np.zeros(total, dtype=np.int64)
    output_lengths = np.zeros(total, dtype=np.int64)
    for number, request_class in enumerate(classes):
        members = np.flatnonzero(class_of == number)
        prompt_dist, output_dist = spec.resolved_lengths(request_class, context_length)
        output_lengths[members] = output_dist.sample(len(members), length_rng)
        if prompt_dist is not None:
            prompt_lengths[members] = prompt_dist.sample(len(members), length_rng)
        else:  # a file prompt keeps its length, cut only where it would not fit with its output
            prompt_lengths[members] = context_length - output_lengths[members]

    prompt_texts: list[str | None] = [None] * total
    if spec.prompt_file is not None:
        lines = read_prompt_file(Path(spec.prompt_file))
        prompt_texts = [lines[pick] for pick in prompt_rng.integers(0, len(lines), size=total)]
    seeds = seed_rng.integers(0, _MAX_SEED, size=total, endpoint=True)
    settings = [request_class.sampling.over(spec.sampling).to_dict() for request_class in classes]

    return [
        RequestSpec(
            index=index,
            arrival_s=float(arrivals[index]),
            prompt_tokens=int(prompt_lengths[index]),
            prompt_text=prompt_texts[index],
            max_tokens=int(output_lengths[index]),
            # ignore_eos defaults to true: the benchmark convention (see scenarios.sampling).
            sampling={
                "ignore_eos": True,
                **settings[class_of[index]],
                "seed": int(seeds[index]),
                "max_tokens": int(output_lengths[index]),
            },
            priority=classes[class_of[index]].priority,
            chat=spec.chat,
            warmup=index < spec.warmup_requests,
        )
        for index in range(total)
    ]


def prompt_text_for(request: RequestSpec) -> str:
    """The request's prompt text: its file line, or synthetic text long enough to trim to prompt_tokens."""
    if request.prompt_text is not None:
        return request.prompt_text
    return synthetic_prompt(request.prompt_tokens, request.sampling["seed"])
