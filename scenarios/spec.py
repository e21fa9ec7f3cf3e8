"""The one scenario schema: TOML files (built-in or the user's) parsed and validated into a frozen ScenarioSpec.

A scenario file, every key at the top level except the tables; `*_tokens` tables accept `<param>_fraction`
(a fraction of the model context, resolved when the model is known) for any number:

    description = "..."                      # required, one line: the real situation it models
    seed = 0                                 # the same seed gives the same request stream
    chat = true                              # wrap each prompt in the model's chat template
    num_requests = 48                        # measured requests; and/or duration_s (stop submitting after)
    warmup_requests = 4                      # run to completion before the measured load starts
    prompt_tokens = {dist = "normal", mean = 60, std = 20, min = 16, max = 128}
    output_tokens = {dist = "fixed", value = 64}
    prompt_file = "prompts.txt"              # optional, relative to the TOML: one prompt per line
    [load]      mode = "open-loop", rate = 2.0 (req/s, or "inf" = all at once), burstiness = 1.0
                mode = "closed-loop", clients = 30
    [sampling]  temperature, top_k, top_p, min_p, repetition_penalty, frequency_penalty,
                presence_penalty, ignore_eos
    [[sampling_mix]]  weight, name, priority, any [sampling] key, prompt_tokens, output_tokens
    [slo]       ttft_ms, tpot_ms, e2e_ms (any subset; a request is "good" when it meets all of them)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, TypedDict, TypeGuard, Unpack

from ..errors import ScenarioError, read_toml
from .lengths import DISTRIBUTIONS, PARAMETERS, LengthDist, allowed_keys
from .prompts import read_prompt_file
from .recorded import ScenarioDict
from .sampling import RequestClass, SamplingSettings

BUILTIN_DIR = Path(__file__).parent / "builtin"
MODES = ("open-loop", "closed-loop")
TOP_KEYS = (
    "description",
    "seed",
    "chat",
    "num_requests",
    "duration_s",
    "warmup_requests",
    "prompt_tokens",
    "output_tokens",
    "prompt_file",
    "load",
    "sampling",
    "sampling_mix",
    "slo",
)
# What one process can hold and drive: every request keeps its prompt, timings and a row in memory,
# every closed-loop client is a thread, and a rate below one request per ~3 hours is a typo.
MAX_REQUESTS = 1_000_000
MAX_CLIENTS = 1024
MIN_RATE = 1e-4
MAX_SEED = 2**63 - 1
MAX_DURATION_S = 7 * 24 * 3600.0
# A description is one line the terminal and the reports show in full; a built-in one is ~150 characters.
MAX_DESCRIPTION = 500
LOAD_KEYS = {"open-loop": ("mode", "rate", "burstiness"), "closed-loop": ("mode", "clients")}
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
MIX_KEYS = ("weight", "name", "priority", *SamplingSettings.keys(), "prompt_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class SLO:
    """Service-level objectives for goodput, in milliseconds; None means no objective on that metric."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def as_dict(self) -> dict[str, float]:
        """Only the objectives that are set: the `slos` argument of profiler.analysis.metrics.compute_metrics."""
        return {name: value for name, value in asdict(self).items() if value is not None}


class SpecChanges(TypedDict, total=False):
    """ScenarioSpec fields that with_overrides replaces as given (None included)."""

    name: str
    description: str
    output_tokens: LengthDist
    prompt_tokens: LengthDist | None
    mode: str
    rate: float | None
    burstiness: float
    clients: int | None
    warmup_requests: int
    prompt_file: str | None
    chat: bool
    sampling: SamplingSettings
    sampling_mix: tuple[RequestClass, ...]
    slo: SLO
    source: str


@dataclass(frozen=True, slots=True)
class ScenarioSpec:
    """A validated load scenario; `source` is the TOML it came from, named in every error."""

    name: str
    description: str
    output_tokens: LengthDist
    prompt_tokens: LengthDist | None = None  # None only with a prompt_file: prompts keep their length
    mode: str = "open-loop"
    rate: float | None = 1.0  # requests per second, math.inf = all at once; open loop only
    burstiness: float = 1.0  # gamma shape of the inter-arrival times: 1 = Poisson, < 1 = burstier
    clients: int | None = None  # concurrent clients; closed loop only
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int = 0
    prompt_file: str | None = None  # absolute path
    chat: bool = False
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    sampling_mix: tuple[RequestClass, ...] = ()
    slo: SLO = field(default_factory=SLO)
    seed: int = 0
    source: str = "<memory>"

    def __post_init__(self) -> None:
        self._check(
            isinstance(self.description, str)
            and bool(self.description.strip())
            and "\n" not in self.description,
            "description",
            "missing or not one line",
            "one line of text",
        )
        self._check(
            len(self.description) <= MAX_DESCRIPTION,
            "description",
            f"{len(self.description):,} characters long",
            f"one line of at most {MAX_DESCRIPTION} characters",
        )
        self._check(self.mode in MODES, "load.mode", f"unknown mode {self.mode!r}", ", ".join(MODES))
        self._validate_load()
        self._validate_counts()
        self._check(
            self.prompt_tokens is not None or self.prompt_file is not None,
            "prompt_tokens",
            "missing",
            "a length table, or a prompt_file",
        )
        self._check(
            _is_int(self.seed) and 0 <= self.seed <= MAX_SEED,
            "seed",
            f"{self.seed!r} is impossible",
            f"an integer in [0, {MAX_SEED}]",
        )
        self._check(isinstance(self.chat, bool), "chat", f"{self.chat!r} is not a boolean", "true, false")

    def _check(self, ok: bool, key: str, problem: str, allowed: str) -> None:
        if not ok:
            raise ScenarioError(f"{self.source}: {key}: {problem}; allowed: {allowed}")

    def _validate_load(self) -> None:
        """The arrival process: a rate and burstiness (open loop) or a number of clients (closed loop)."""
        if self.mode == "open-loop":
            self._check(
                _is_number(self.rate) and self.rate >= MIN_RATE,
                "load.rate",
                f"{self.rate!r} is not a usable rate",
                f'requests per second >= {MIN_RATE:g}, or "inf"',
            )
            self._check(
                _is_number(self.burstiness) and 1e-3 <= self.burstiness <= 1e3,
                "load.burstiness",
                f"{self.burstiness!r} is impossible",
                "a number in [0.001, 1000] (1 = Poisson)",
            )
            self._check(
                self.clients is None, "load.clients", "set on an open-loop load", "rate and burstiness"
            )
            self._check(
                (self.rate is not None and math.isfinite(self.rate)) or self.num_requests is not None,
                "num_requests",
                'missing with rate = "inf"',
                "a request count (duration cannot bound it)",
            )
        else:
            problem = (
                "missing on a closed-loop load" if self.clients is None else f"{self.clients!r} is impossible"
            )
            self._check(
                _is_int(self.clients) and 1 <= self.clients <= MAX_CLIENTS,
                "load.clients",
                problem,
                f"an integer in [1, {MAX_CLIENTS}] (concurrent clients, a thread each)",
            )
            self._check(
                self.num_requests is not None,
                "num_requests",
                "missing on a closed-loop load",
                "a request count (duration_s then stops it early)",
            )

    def _validate_counts(self) -> None:
        """How many requests, for how long, after how many warm-up requests."""
        self._check(
            self.num_requests is None
            or (_is_int(self.num_requests) and 1 <= self.num_requests <= MAX_REQUESTS),
            "num_requests",
            f"{self.num_requests!r} is impossible",
            f"an integer in [1, {MAX_REQUESTS:,}] (split a longer load into several runs)",
        )
        self._check(
            self.duration_s is None
            or (_is_number(self.duration_s) and 0 < self.duration_s <= MAX_DURATION_S),
            "duration_s",
            f"{self.duration_s!r} is impossible",
            f"seconds in (0, {MAX_DURATION_S:g}] (a week)",
        )
        self._check(
            self.num_requests is not None or self.duration_s is not None,
            "num_requests",
            "neither num_requests nor duration_s is set",
            "num_requests and/or duration_s",
        )
        if (
            self.num_requests is None
            and self.mode == "open-loop"
            and _is_number(self.rate)
            and _is_number(self.duration_s)
        ):
            expected = self.rate * self.duration_s
            self._check(
                expected <= MAX_REQUESTS,
                "duration_s",
                f"{self.duration_s!r} s at {self.rate!r} requests/s is {expected:.3g} requests",
                f"rate x duration_s <= {MAX_REQUESTS:,}, or set num_requests",
            )
        self._check(
            _is_int(self.warmup_requests) and 0 <= self.warmup_requests <= MAX_REQUESTS,
            "warmup_requests",
            f"{self.warmup_requests!r} is impossible",
            f"an integer in [0, {MAX_REQUESTS:,}]",
        )
        # A warm-up readies the engine for the measured load; one longer than that load is a typo (and, all
        # submitted at once on an open loop, a burst the KV pool was never sized for).
        self._check(
            self.num_requests is None or self.warmup_requests <= self.num_requests,
            "warmup_requests",
            f"{self.warmup_requests} warm-up requests for {self.num_requests} measured ones",
            f"at most num_requests ({self.num_requests})",
        )

    @property
    def open_loop(self) -> bool:
        return self.mode == "open-loop"

    def classes(self) -> tuple[RequestClass, ...]:
        """The request classes the load draws from: the sampling mix, or one class of everything."""
        return self.sampling_mix or (RequestClass(weight=1.0, name="default"),)

    def with_overrides(
        self,
        num_requests: int | None = None,
        duration_s: float | None = None,
        seed: int | None = None,
        **fields: Unpack[SpecChanges],
    ) -> ScenarioSpec:
        """A copy with the given settings replaced (None keeps the scenario's), validated again; `fields` are
        other ScenarioSpec fields (mode, clients, rate, output_tokens, ...) replaced as given, None included."""
        unknown = sorted(set(fields) - {spec_field.name for spec_field in dataclass_fields(self)})
        if unknown:
            raise ScenarioError(f"{self.source}: cannot override {', '.join(unknown)}: not scenario settings")
        if num_requests is not None and "warmup_requests" not in fields and _is_int(num_requests):
            # --requests 2 on a scenario that warms up with 4: the warm-up shrinks with the load (a run prints it).
            fields["warmup_requests"] = min(self.warmup_requests, max(num_requests, 0))
        return replace(
            self,
            num_requests=self.num_requests if num_requests is None else num_requests,
            duration_s=self.duration_s if duration_s is None else duration_s,
            seed=self.seed if seed is None else seed,
            **fields,
        )

    def validate_against_context(self, context_length: int) -> None:
        """Raise ScenarioError if the longest prompt plus the longest output can exceed the context.

        prompt_tokens count the user's text; a chat template adds a few tokens the session allows for.
        """
        if not _is_int(context_length) or context_length < 2:
            raise ScenarioError(f"{self.source}: context_length {context_length!r} is impossible")
        for index, request_class in enumerate(self.classes()):
            prefix = f"sampling_mix[{index}]." if self.sampling_mix else ""
            prompt_key = prefix if request_class.prompt_tokens else ""
            output_key = prefix if request_class.output_tokens else ""
            prompt, output = self.resolved_lengths(request_class, context_length)
            longest_output = output.bounds()[1]
            # A file prompt keeps its own length, cut where it would not fit: it needs room for 1 token.
            longest_prompt = prompt.bounds()[1] if prompt is not None else 1
            if longest_prompt + longest_output > context_length:
                raise ScenarioError(
                    f"{self.source}: {prompt_key}prompt_tokens + {output_key}output_tokens: up to "
                    f"{longest_prompt} + {longest_output} tokens exceed the model context of {context_length}; "
                    f"allowed: max clamps (or *_fraction) with prompt + output <= {context_length}"
                )

    def resolved_lengths(
        self, request_class: RequestClass, context_length: int
    ) -> tuple[LengthDist | None, LengthDist]:
        """The class's (prompt, output) distributions in absolute tokens for this model context."""
        prompt = request_class.prompt_tokens or self.prompt_tokens
        output = request_class.output_tokens or self.output_tokens
        try:
            return (prompt.resolve(context_length) if prompt else None), output.resolve(context_length)
        except ValueError as err:
            raise ScenarioError(f"{self.source}: at context {context_length}: {err}") from None

    def to_dict(self) -> ScenarioDict:
        """JSON-safe settings for result.json (rate "inf" as a string)."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "load": {
                "mode": self.mode,
                "rate": _json_rate(self.rate),
                "burstiness": self.burstiness,
                "clients": self.clients,
            },
            "num_requests": self.num_requests,
            "duration_s": self.duration_s,
            "warmup_requests": self.warmup_requests,
            "prompt_tokens": self.prompt_tokens.to_dict() if self.prompt_tokens else None,
            "output_tokens": self.output_tokens.to_dict(),
            "prompt_file": self.prompt_file,
            "chat": self.chat,
            "sampling": self.sampling.to_dict(),
            "sampling_mix": [request_class.to_dict() for request_class in self.sampling_mix],
            "slo": self.slo.as_dict(),
            "seed": self.seed,
        }


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_rate(rate: float | None) -> float | str | None:
    return "inf" if rate is not None and math.isinf(rate) else rate


# ----------------------------------------------------------------------------------------------
# Finding and parsing files
# ----------------------------------------------------------------------------------------------


def builtin_names() -> list[str]:
    return sorted(path.stem for path in BUILTIN_DIR.glob("*.toml"))


def load_scenario(name_or_path: str) -> ScenarioSpec:
    """A built-in scenario by name (see list_scenarios) or a scenario TOML file by path."""
    path = _locate(str(name_or_path))
    data, _text = read_toml(path, ScenarioError, kind="scenario file")
    return _Parser(path).scenario(data)


def list_scenarios() -> list[ScenarioSpec]:
    """Every built-in scenario, by name."""
    return [load_scenario(name) for name in builtin_names()]


def _locate(name_or_path: str) -> Path:
    names = builtin_names()
    if name_or_path in names:
        return BUILTIN_DIR / f"{name_or_path}.toml"
    path = Path(name_or_path)
    looks_like_path = path.suffix == ".toml" or len(path.parts) > 1 or path.exists()
    if not looks_like_path:
        raise ScenarioError(
            f"unknown scenario {name_or_path!r}; allowed: a built-in ({', '.join(names)}) or a path to a .toml file"
        )
    if not path.is_file():
        raise ScenarioError(
            f"{path}: no such scenario file; allowed: a built-in ({', '.join(names)}) or an existing .toml file"
        )
    return path


class _Parser:
    """Checks keys and types of one file's TOML data; range checks live in the dataclasses."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str, allowed: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: {key}: {problem}; allowed: {allowed}")

    def keys(self, table: Mapping[str, object], allowed: Sequence[str], where: str) -> None:
        for key in table:
            if key not in allowed:
                place = f"in [{where}]" if where else "at the top level"
                raise self.fail(
                    f"{where + '.' if where else ''}{key}",
                    f"unknown key {place}",
                    f"keys {', '.join(allowed)}",
                )

    def wrong_type(self, value: object, key: str, allowed: str) -> ScenarioError:
        return self.fail(key, f"{value!r} has the wrong type ({type(value).__name__})", allowed)

    def number(self, value: object, key: str) -> float:
        if not _is_number(value):
            raise self.wrong_type(value, key, "a number")
        return value

    def integer(self, value: object, key: str) -> int:
        if not _is_int(value):
            raise self.wrong_type(value, key, "an integer")
        return value

    def string(self, value: object, key: str) -> str:
        if not isinstance(value, str):
            raise self.wrong_type(value, key, "a string")
        return value

    def boolean(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.wrong_type(value, key, "true or false")
        return value

    def table(self, value: object, key: str) -> dict[str, object]:
        if not isinstance(value, dict):
            raise self.wrong_type(value, key, "a table")
        return value  # a TOML table: its keys are strings

    def scenario(self, data: Mapping[str, object]) -> ScenarioSpec:
        self.keys(data, TOP_KEYS, "")
        get = data.get
        load = self.table(get("load", {}), "load")
        mode = self.string(load.get("mode", "open-loop"), "load.mode")
        if mode not in MODES:
            raise self.fail("load.mode", f"unknown mode {mode!r}", ", ".join(MODES))
        self.keys(load, LOAD_KEYS[mode], "load")
        rate = self.rate(load.get("rate")) if mode == "open-loop" else None
        if mode == "open-loop" and rate is None:
            raise self.fail("load.rate", "missing on an open-loop load", 'requests per second > 0, or "inf"')
        # Read in this order, so that the first problem in it is the one reported.
        burstiness = self.number(load.get("burstiness", 1.0), "load.burstiness")
        clients = self.integer(load["clients"], "load.clients") if "clients" in load else None
        description = self.string(get("description", ""), "description")
        seed = self.integer(get("seed", 0), "seed")
        chat = self.boolean(get("chat", False), "chat")
        warmup_requests = self.integer(get("warmup_requests", 0), "warmup_requests")
        requests, seconds = get("num_requests"), get("duration_s")
        num_requests = None if requests is None else self.integer(requests, "num_requests")
        duration_s = None if seconds is None else self.number(seconds, "duration_s")
        prompt_tokens = self.length(get("prompt_tokens"), "prompt_tokens")
        output_tokens = self.length(get("output_tokens"), "output_tokens")
        prompt_file = self.prompt_file(get("prompt_file"))
        sampling = self.sampling(
            self.keys_of(get("sampling", {}), SamplingSettings.keys(), "sampling"), "sampling"
        )
        sampling_mix = self.mix(get("sampling_mix", []))
        slo = self.slo(self.keys_of(get("slo", {}), list(SLO_KEYS), "slo"))
        if output_tokens is None:
            raise self.fail(
                "output_tokens", "missing", f"a length table with dist = {' | '.join(DISTRIBUTIONS)}"
            )
        return ScenarioSpec(
            name=self.path.stem,
            source=str(self.path),
            mode=mode,
            rate=rate,
            burstiness=burstiness,
            clients=clients,
            description=description,
            seed=seed,
            chat=chat,
            warmup_requests=warmup_requests,
            num_requests=num_requests,
            duration_s=duration_s,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            prompt_file=prompt_file,
            sampling=sampling,
            sampling_mix=sampling_mix,
            slo=slo,
        )

    def keys_of(self, value: object, allowed: list[str], key: str) -> dict[str, object]:
        table = self.table(value, key)
        self.keys(table, allowed, key)
        return table

    def rate(self, value: object) -> float | None:
        if value is None:
            return None
        if value == "inf":
            return math.inf
        if _is_number(value) and not math.isnan(value) and value > 0:
            return float(value)
        raise self.fail("load.rate", f"{value!r} is not a positive rate", 'requests per second > 0, or "inf"')

    def length(self, value: object, key: str) -> LengthDist | None:
        if value is None:
            return None
        table = self.table(value, key)
        dist = table.get("dist")
        if not isinstance(dist, str) or dist not in DISTRIBUTIONS:
            raise self.fail(f"{key}.dist", f"unknown distribution {dist!r}", ", ".join(DISTRIBUTIONS))
        self.keys(table, allowed_keys(dist), key)
        numbers: dict[str, float] = {}
        relative: set[str] = set()
        for name in PARAMETERS:
            for toml_key, is_fraction in ((name, False), (f"{name}_fraction", True)):
                if toml_key in table:
                    if name in numbers:
                        raise self.fail(
                            f"{key}.{toml_key}", f"{name} is given twice", f"{name} or {name}_fraction"
                        )
                    numbers[name] = self.number(table[toml_key], f"{key}.{toml_key}")
                    if is_fraction:
                        relative.add(name)
        try:
            return LengthDist(dist=dist, relative=frozenset(relative), **numbers)
        except ValueError as err:
            raise ScenarioError(f"{self.path}: {key}.{err}") from None

    def prompt_file(self, value: object) -> str | None:
        if value is None:
            return None
        path = self.path.parent / self.string(value, "prompt_file")
        try:
            read_prompt_file(path)
        except FileNotFoundError:
            raise self.fail(
                "prompt_file", f"{path}: no such file", "a text file, relative to the TOML"
            ) from None
        except (OSError, ValueError) as err:
            raise self.fail(
                "prompt_file", f"{path}: {err}", "a readable text file, one prompt per line"
            ) from None
        return str(path.resolve())

    def sampling(self, table: Mapping[str, object], key: str) -> SamplingSettings:
        written = _as_written(table)
        values = {name: written[name] for name in SamplingSettings.keys() if name in written}
        try:
            return SamplingSettings(**values)
        except ValueError as err:
            raise ScenarioError(f"{self.path}: {key}.{err}") from None

    def mix(self, entries: object) -> tuple[RequestClass, ...]:
        if not isinstance(entries, list):
            raise self.fail("sampling_mix", "not an array of tables", "[[sampling_mix]] entries")
        classes = []
        for index, entry in enumerate(entries):
            key = f"sampling_mix[{index}]"
            table = self.table(entry, key)
            self.keys(table, MIX_KEYS, key)
            if "weight" not in table:
                raise self.fail(f"{key}.weight", "missing", "a number > 0 (shares are weight / total weight)")
            written = _as_written(table)
            try:
                classes.append(
                    RequestClass(
                        weight=written["weight"],
                        name=self.string(table.get("name", f"class{index}"), f"{key}.name"),
                        priority=written.get("priority", 0),
                        sampling=self.sampling(table, key),
                        prompt_tokens=self.length(table.get("prompt_tokens"), f"{key}.prompt_tokens"),
                        output_tokens=self.length(table.get("output_tokens"), f"{key}.output_tokens"),
                    )
                )
            except ValueError as err:
                raise ScenarioError(f"{self.path}: {key}.{err}") from None
        return tuple(classes)

    def slo(self, table: Mapping[str, object]) -> SLO:
        objectives: dict[str, float] = {}
        for name, value in table.items():
            if not (_is_number(value) and math.isfinite(value) and value > 0):
                raise self.fail(f"slo.{name}", f"{value!r} is impossible", "milliseconds > 0")
            objectives[name] = value
        return SLO(**objectives)


def _as_written(table: Mapping[str, object]) -> Mapping[str, Any]:
    """A TOML table's values as the user wrote them, for a dataclass whose own checks (__post_init__) narrow
    them, with the words those checks use: the one place a scenario's values stay untyped."""
    return table


# ----------------------------------------------------------------------------------------------
# Human-readable rows for `infer-prof scenarios show`
# ----------------------------------------------------------------------------------------------


def describe(spec: ScenarioSpec) -> list[tuple[str, str]]:
    """(setting, value) rows that say what the scenario does, in words."""
    if spec.mode == "closed-loop":
        load = (
            f"closed loop, {spec.clients} client{'s' if spec.clients != 1 else ''} (each waits for its reply)"
        )
    elif spec.rate is not None and math.isinf(spec.rate):
        load = "open loop, every request at once"
    else:
        process = "Poisson" if spec.burstiness == 1 else f"gamma, burstiness {spec.burstiness:g}"
        load = f"open loop, {spec.rate:g} req/s, {process} arrivals"
    measured = f"{spec.num_requests}" if spec.num_requests else f"as many as arrive in {spec.duration_s:g} s"
    stop = (
        f"submissions stop after {spec.duration_s:g} s"
        if spec.duration_s
        else "until every request is served"
    )
    prompt_source = f"lines of {spec.prompt_file}" if spec.prompt_file else "synthetic text"
    prompt_length = spec.prompt_tokens.describe() if spec.prompt_tokens else "each line's own length"
    rows = [
        ("name", spec.name),
        ("description", spec.description),
        ("source", spec.source),
        ("load", load),
        ("requests", f"{measured} measured + {spec.warmup_requests} warmup"),
        ("duration", stop),
        ("prompt", f"{prompt_source}, {prompt_length}" + (", chat template" if spec.chat else "")),
        ("output", spec.output_tokens.describe()),
        ("sampling", _settings_text(spec.sampling) or "engine defaults"),
    ]
    total_weight = sum(request_class.weight for request_class in spec.sampling_mix)
    for request_class in spec.sampling_mix:
        parts = [f"{request_class.weight / total_weight:.0%}", f"priority {request_class.priority}"]
        if settings := _settings_text(request_class.sampling):
            parts.append(settings)
        if request_class.prompt_tokens:
            parts.append(f"prompt {request_class.prompt_tokens.describe()}")
        if request_class.output_tokens:
            parts.append(f"output {request_class.output_tokens.describe()}")
        rows.append((f"class {request_class.name}", ", ".join(parts)))
    slo = spec.slo.as_dict()
    slo_text = ", ".join(f"{name.removesuffix('_ms').upper()} <= {value:g} ms" for name, value in slo.items())
    rows.append(("SLO", slo_text or "none (goodput = request throughput)"))
    rows.append(("seed", str(spec.seed)))
    return rows


def _settings_text(settings: SamplingSettings) -> str:
    return ", ".join(
        f"{name}={str(value).lower() if isinstance(value, bool) else value}"
        for name, value in settings.to_dict().items()
    )
