"""The engine options: one table (OPTION by name, OPTIONS in order) of names, flags, defaults, ranges and help, from which EngineOptions, the CLI, serve, sweep axes, budgets and golden derive."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Generic, TypedDict, TypeVar

from ...engine.config import DEFAULT_MODEL, EngineConfig
from ...engine.device import resolve_device, resolve_dtype_name
from ...errors import EngineConfigError, OptionError
from .machine import available_memory_bytes, gib, usable_cpus

# Sizes one engine can be given: the KV block ids and the plans' counts are 32-bit in the C twins, and
# beyond these the engine would spend the machine's memory on bookkeeping long before it served a token.
MAX_BLOCK_SIZE = 1024
MAX_KV_BLOCKS = 2**24
MAX_BATCH = 65_536
MAX_BATCHED_TOKENS = 2**20
MAX_SEED = 2**63 - 1
DTYPES = ("float32", "bfloat16", "int8", "q4_1")
ENGINE_LIMIT = "what one engine can use"

# A value an option takes: as the command line, a sweep axis or the engine's defaults give it.
OptionValue = str | int | float | bool | None
V = TypeVar("V", bound=OptionValue, covariant=True)  # covariant: an Option[str] is an Option[OptionValue]
T = TypeVar("T")

# The engine's own sizes keep its defaults: read here, so no face restates them.
_ENGINE_DEFAULTS: dict[str, OptionValue] = {
    option.name: option.default for option in fields(EngineConfig) if option.default is not MISSING
}  # every field has a default: the filter only tells the type checker so


def _engine_default(name: str, kind: type[T]) -> T:
    """EngineConfig's default for `name`, of the option's type (an engine that changed it fails at import)."""
    default = _ENGINE_DEFAULTS[name]
    if not isinstance(default, kind):
        raise TypeError(f"EngineConfig.{name} defaults to {default!r}, not to a {kind.__name__}")
    return default


def _engine_size(name: str) -> int | None:
    """EngineConfig's default for a KV pool size, which may be unset (None: the engine sizes the pool)."""
    return None if _ENGINE_DEFAULTS[name] is None else _engine_default(name, int)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.I)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}


@dataclass(frozen=True, slots=True)
class Option(Generic[V]):
    """One engine option as every face sees it; V is the type of its default.

    `name` is the option's one name: EngineOptions' field (but kv_memory, given as text, is the field
    kv_memory_bytes once parsed), the sweep axis and the budget override key. `engine_field` is the
    EngineConfig field it becomes (the same name, but kv_memory's): how an engine-config error is put in the
    flags' terms."""

    name: str
    flag: str
    kind: type  # what the command line gives: str or int (then parsed, for native and kv_memory)
    default: V  # as the command line would give it (native "none"); None: not given
    help: str
    short: str | None = None
    least: int = 1
    most: int | Callable[[], int] | None = None  # None: not a bounded integer
    why: str = ENGINE_LIMIT  # what the bound is
    engine_field: str | None = None

    @property
    def field(self) -> str:
        return "kv_memory_bytes" if self.name == "kv_memory" else self.name

    @property
    def axis_kind(self) -> str:
        """The kind of a sweep axis' values: as on the command line."""
        return "integer" if self.kind is int else "string"

    def check(self, value: int | None) -> None:
        """OptionError naming the flag when an integer option is outside its range."""
        if self.most is None or value is None:
            return
        most = self.most() if callable(self.most) else self.most
        if not self.least <= value <= most:
            raise OptionError(f"{self.flag}={value} is impossible: use {self.least} to {most:,} ({self.why})")


class OptionTable(TypedDict):
    """OPTION: every option by name, each with its default's own type (OPTION["seed"].default is an int)."""

    model: Option[str]
    dtype: Option[str]
    device: Option[str]
    native: Option[str]
    kv_blocks: Option[int | None]
    kv_memory: Option[int | None]
    block_size: Option[int]
    max_batch: Option[int]
    max_batched_tokens: Option[int]
    policy: Option[str]
    seed: Option[int]
    threads: Option[int | None]
    graphs: Option[str]


OPTION: OptionTable = {
    "model": Option(
        "model",
        "--model",
        str,
        DEFAULT_MODEL,
        short="-m",
        help="smollm2-135m (default, real weights), a PATH.gguf, or synthetic:<tiny|small|base|large>.",
    ),
    "dtype": Option(
        "dtype",
        "--dtype",
        str,
        "auto",
        help="Weights and activations: float32, bfloat16, int8 (8-bit weights, float32 activations; CPU only), q4_1 (4-bit weights in llama.cpp's Q4_1 numbers, run by a C kernel; CPU only), or auto (bfloat16 on a GPU, float32 on the CPU).",
    ),
    "device": Option(
        "device",
        "--device",
        str,
        "auto",
        help="Where the model, its KV pool and activations live: auto (a CUDA GPU when there is one, else the "
        "CPU), cpu, cuda or cuda:N. The scheduler, KV allocator and input preparation run on the host "
        "either way.",
    ),
    "native": Option(
        "native",
        "--native",
        str,
        "none",
        help="C twins to switch on: none, all (every twin, each its own call), a comma list of "
        "sampler,kv_alloc,scheduler,prepare, or core: scheduler, kv_alloc and prepare fused into one C "
        "call per step (core,sampler adds the C sampler).",
    ),
    "kv_blocks": Option(
        "kv_blocks",
        "--kv-blocks",
        int,
        _engine_size("kv_blocks"),
        most=MAX_KV_BLOCKS,
        engine_field="kv_blocks",
        help="KV pool size in blocks (or use --kv-memory).",
    ),
    "kv_memory": Option(
        "kv_memory",
        "--kv-memory",
        str,
        _engine_size("kv_memory_bytes"),
        engine_field="kv_memory_bytes",
        help="KV pool size as memory, e.g. 256MiB (default: sized for --max-batch full contexts, at most 256MiB).",
    ),
    "block_size": Option(
        "block_size",
        "--block-size",
        int,
        _engine_default("block_size", int),
        most=MAX_BLOCK_SIZE,
        engine_field="block_size",
        help="Token slots per KV block.",
    ),
    "max_batch": Option(
        "max_batch",
        "--max-batch",
        int,
        _engine_default("max_batch", int),
        most=MAX_BATCH,
        engine_field="max_batch",
        help="Most sequences running at once.",
    ),
    "max_batched_tokens": Option(
        "max_batched_tokens",
        "--max-batched-tokens",
        int,
        _engine_default("max_batched_tokens", int),
        most=MAX_BATCHED_TOKENS,
        engine_field="max_batched_tokens",
        help="Token budget per engine step (prefill chunks + decodes).",
    ),
    "policy": Option(
        "policy",
        "--policy",
        str,
        _engine_default("policy", str),
        engine_field="policy",
        help="Scheduling policy: fcfs or priority.",
    ),
    "seed": Option(
        "seed",
        "--seed",
        int,
        _engine_default("seed", int),
        least=0,
        most=MAX_SEED,
        why="a 63-bit seed",
        engine_field="seed",
        help="Seed for weights of synthetic models, sampling and load.",
    ),
    "threads": Option(
        "threads",
        "--threads",
        int,
        None,
        most=usable_cpus,
        why="the CPUs this process may use",
        help="torch intra-op threads (default: torch's choice).",
    ),
    "graphs": Option(
        "graphs",
        "--graphs",
        str,
        "off",
        help="on: capture decode steps as CUDA graphs (padded batch buckets, one launch a step) and replay "
        "them; off: every step eager. Needs a GPU.",
    ),
}
# In the order the faces show them (OPTION's order).
OPTIONS: tuple[Option[OptionValue], ...] = (
    OPTION["model"],
    OPTION["dtype"],
    OPTION["device"],
    OPTION["native"],
    OPTION["kv_blocks"],
    OPTION["kv_memory"],
    OPTION["block_size"],
    OPTION["max_batch"],
    OPTION["max_batched_tokens"],
    OPTION["policy"],
    OPTION["seed"],
    OPTION["threads"],
    OPTION["graphs"],
)


def parse_size(text: str, option: str = "--kv-memory") -> int:
    """Parse '512MiB', '1.5GB', '1048576' into bytes."""
    match = _SIZE.match(text or "")
    unit = (match.group(2) or "").lower() if match else ""
    if not match or unit not in _UNITS:
        raise OptionError(f"{option}={text!r} is not a size; use e.g. 256MiB, 1GiB or a byte count")
    number = float(match.group(1))
    if not number < 2**62:
        raise OptionError(f"{option}={text!r} is not a size this machine can have; use e.g. 256MiB")
    value = int(number * _UNITS[unit])
    if value <= 0:
        raise OptionError(f"{option}={text!r} must be positive")
    return value


def in_flag_terms(error: EngineConfigError) -> EngineConfigError:
    """The engine's error with its field names as the flags a user typed (the engine names no flag)."""
    message = str(error)
    for option in OPTIONS:
        if option.engine_field:
            message = re.sub(rf"\b{option.engine_field}\b", option.flag, message)
    return EngineConfigError(message)


@dataclass(slots=True)
class EngineOptions:
    """What to load and how to size the engine: one field per entry of OPTIONS, with its default."""

    model: str = OPTION["model"].default
    dtype: str = OPTION["dtype"].default  # "auto": the device's default (engine.device.default_dtype)
    # auto, cpu, cuda or cuda:N; resolved on construction to "cpu" or "cuda:N"
    device: str = OPTION["device"].default
    native: frozenset[str] = field(default_factory=frozenset)  # OPTIONS' "none", parsed
    kv_blocks: int | None = OPTION["kv_blocks"].default
    kv_memory_bytes: int | None = OPTION["kv_memory"].default
    block_size: int = OPTION["block_size"].default
    max_batch: int = OPTION["max_batch"].default
    max_batched_tokens: int = OPTION["max_batched_tokens"].default
    policy: str = OPTION["policy"].default
    seed: int = OPTION["seed"].default
    threads: int | None = OPTION["threads"].default
    # "on": decode steps replayed as CUDA graphs (engine.cuda_graphs); needs a GPU
    graphs: str = OPTION["graphs"].default

    def __post_init__(self) -> None:
        self.device = resolve_device(self.device)
        if self.graphs not in ("on", "off"):
            raise OptionError(f"--graphs={self.graphs!r}: use on or off")
        if self.graphs == "on" and self.device == "cpu":
            raise OptionError(
                "--graphs on captures CUDA graphs and needs a GPU (this engine runs on the CPU): "
                "drop --graphs, or give --device cuda on a machine with one"
            )
        self.dtype = (
            resolve_dtype_name(self.dtype, self.device) if isinstance(self.dtype, str) else self.dtype
        )
        if self.dtype not in DTYPES:
            raise OptionError(
                f"--dtype={self.dtype!r}: use float32, bfloat16, int8 (8-bit weights, CPU), q4_1 (4-bit weights, CPU) or auto "
                "(bfloat16 on a GPU, float32 on the CPU)"
            )
        for option in OPTIONS:
            if option.name != "kv_memory":
                option.check(getattr(self, option.field))
        if self.dtype in ("int8", "q4_1") and self.device != "cpu":
            kernels = "torch's int8 linears" if self.dtype == "int8" else "a C kernel for x86 and portable C"
            raise OptionError(
                f"--dtype {self.dtype} runs on the CPU only ({kernels}): use --device cpu, or "
                f"float32 or bfloat16 on {self.device}"
            )
        if self.dtype == "q4_1":
            from ...native_paths.loader import require_symbols

            require_symbols("--dtype q4_1", "np_block_linear", "np_decode_attention", "np_decode_layers")
        available = available_memory_bytes()
        if (
            self.device == "cpu"
            and self.kv_memory_bytes is not None
            and available is not None
            and self.kv_memory_bytes > available
        ):
            raise OptionError(
                f"--kv-memory={gib(self.kv_memory_bytes)} is more than this machine has available "
                f"({gib(available)}); give less"
            )
        self.engine_config()  # the engine's own rules (one KV pool size, not two), named as flags

    def engine_config(self) -> EngineConfig:
        """The engine's config these options describe; EngineConfigError names the flags at fault."""
        values = {
            option.engine_field: getattr(self, option.field) for option in OPTIONS if option.engine_field
        }
        try:
            return EngineConfig(**values)
        except EngineConfigError as error:
            raise in_flag_terms(error) from None

    def to_dict(self) -> EngineOptionsDict:
        """The options as JSON values, in field order (native as a sorted list)."""
        return {
            "model": self.model,
            "dtype": self.dtype,
            "device": self.device,
            "native": sorted(self.native),
            "kv_blocks": self.kv_blocks,
            "kv_memory_bytes": self.kv_memory_bytes,
            "block_size": self.block_size,
            "max_batch": self.max_batch,
            "max_batched_tokens": self.max_batched_tokens,
            "policy": self.policy,
            "seed": self.seed,
            "threads": self.threads,
            "graphs": self.graphs,
        }


class EngineOptionsDict(TypedDict):
    """EngineOptions.to_dict(): its fields as JSON values (serve's /infer-prof/info shows them)."""

    model: str
    dtype: str
    device: str
    native: list[str]  # sorted
    kv_blocks: int | None
    kv_memory_bytes: int | None
    block_size: int
    max_batch: int
    max_batched_tokens: int
    policy: str
    seed: int
    threads: int | None
    graphs: str


def options_from_values(values: Mapping[str, OptionValue]) -> EngineOptions:
    """EngineOptions from values named as OPTIONS (the CLI's and a sweep axis'): native and kv_memory given as
    text are parsed, and an option not given takes its default."""
    from ...native_paths.toggles import parse_native

    given = _Given(values)
    kv_memory = given.text_or_count(OPTION["kv_memory"])
    return EngineOptions(
        model=given.text(OPTION["model"]),
        dtype=given.text(OPTION["dtype"]),
        device=given.text(OPTION["device"]),
        native=parse_native(given.text(OPTION["native"])),
        kv_blocks=given.count_or_none(OPTION["kv_blocks"]),
        kv_memory_bytes=parse_size(kv_memory) if isinstance(kv_memory, str) else kv_memory,
        block_size=given.count(OPTION["block_size"]),
        max_batch=given.count(OPTION["max_batch"]),
        max_batched_tokens=given.count(OPTION["max_batched_tokens"]),
        policy=given.text(OPTION["policy"]),
        seed=given.count(OPTION["seed"]),
        threads=given.count_or_none(OPTION["threads"]),
        graphs=given.text(OPTION["graphs"]),
    )


@dataclass(frozen=True, slots=True)
class _Given:
    """The values a face gave, each read as its option's type (its default when not given); the faces give
    each option's kind (Typer converts flags, a sweep file's axes are checked by kind), so a value of
    another type is a caller's mistake, named by its flag."""

    values: Mapping[str, OptionValue]

    def _value(self, option: Option[OptionValue]) -> OptionValue:
        return self.values.get(option.name, option.default)

    def _wrong(self, option: Option[OptionValue], value: OptionValue, kind: str) -> OptionError:
        return OptionError(f"{option.flag}={value!r} is not {kind}")

    def text(self, option: Option[OptionValue]) -> str:
        value = self._value(option)
        if not isinstance(value, str):
            raise self._wrong(option, value, "text")
        return value

    def count(self, option: Option[OptionValue]) -> int:
        value = self._value(option)
        if not isinstance(value, int):
            raise self._wrong(option, value, "an integer")
        return value

    def count_or_none(self, option: Option[OptionValue]) -> int | None:
        value = self._value(option)
        return None if value is None else self.count(option)

    def text_or_count(self, option: Option[OptionValue]) -> str | int | None:
        value = self._value(option)
        return value if isinstance(value, str) else self.count_or_none(option)
