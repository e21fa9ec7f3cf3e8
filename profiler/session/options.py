"""The engine options every engine-building command shares, parsed and validated in one place."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.device import resolve_device, resolve_dtype_name
from errors import OptionError
from profiler.session.machine import available_memory_bytes, gib, usable_cpus

# Sizes one engine can be given: the KV block ids and the plans' counts are 32-bit in the C twins, and
# beyond these the engine would spend the machine's memory on bookkeeping long before it served a token.
MAX_BLOCK_SIZE = 1024
MAX_KV_BLOCKS = 2**24
MAX_BATCH = 65_536
MAX_BATCHED_TOKENS = 2**20
MAX_SEED = 2**63 - 1

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.I)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}  # fmt: skip


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


@dataclass(slots=True)
class EngineOptions:
    """What to load and how to size the engine; mirrors the shared CLI options."""

    model: str = "smollm2-135m"
    dtype: str = "float32"  # or "auto": the device's default (engine.device.default_dtype)
    device: str = "cpu"  # auto, cpu, cuda or cuda:N; resolved on construction to "cpu" or "cuda:N"
    native: frozenset[str] = field(default_factory=frozenset)
    kv_blocks: int | None = None
    kv_memory_bytes: int | None = None
    block_size: int = 16
    max_batch: int = 32
    max_batched_tokens: int = 512
    policy: str = "fcfs"
    seed: int = 0
    threads: int | None = None
    graphs: str = "off"  # "on": decode steps replayed as CUDA graphs (engine.cuda_graphs); needs a GPU

    def __post_init__(self) -> None:
        self.device = resolve_device(self.device)
        if self.graphs not in ("on", "off"):
            raise OptionError(f"--graphs={self.graphs!r}: use on or off")
        if self.graphs == "on" and self.device == "cpu":
            raise OptionError("--graphs on captures CUDA graphs and needs a GPU (this engine runs on the CPU): "
                              "drop --graphs, or give --device cuda on a machine with one")  # fmt: skip
        self.dtype = resolve_dtype_name(self.dtype, self.device) if isinstance(self.dtype, str) else self.dtype
        if self.dtype not in ("float32", "bfloat16", "int8"):
            raise OptionError(f"--dtype={self.dtype!r}: use float32, bfloat16, int8 (8-bit weights, CPU) or auto "
                              "(bfloat16 on a GPU, float32 on the CPU)")  # fmt: skip
        if self.dtype == "int8" and self.device != "cpu":
            raise OptionError(f"--dtype int8 runs on the CPU only (torch's int8 linears): use --device cpu, or "
                              f"float32 or bfloat16 on {self.device}")  # fmt: skip
        if self.kv_blocks is not None and self.kv_memory_bytes is not None:
            raise OptionError("--kv-blocks and --kv-memory both size the KV pool: give one of them")
        bounds = {"--kv-blocks": (self.kv_blocks, MAX_KV_BLOCKS), "--block-size": (self.block_size, MAX_BLOCK_SIZE),
                  "--max-batch": (self.max_batch, MAX_BATCH), "--max-batched-tokens": (self.max_batched_tokens, MAX_BATCHED_TOKENS),
                  "--threads": (self.threads, usable_cpus())}  # fmt: skip
        for option, (value, most) in bounds.items():
            if value is not None and not 1 <= value <= most:
                why = "the CPUs this process may use" if option == "--threads" else "what one engine can use"
                raise OptionError(f"{option}={value} is impossible: use 1 to {most:,} ({why})")
        if not 0 <= self.seed <= MAX_SEED:
            raise OptionError(f"--seed={self.seed} is impossible: use an integer from 0 to {MAX_SEED}")
        available = available_memory_bytes()
        if self.device == "cpu" and self.kv_memory_bytes is not None and available is not None and self.kv_memory_bytes > available:
            raise OptionError(f"--kv-memory={gib(self.kv_memory_bytes)} is more than this machine has available "
                              f"({gib(available)}); give less")  # fmt: skip
        if self.policy not in ("fcfs", "priority"):
            raise OptionError(f"--policy={self.policy!r}: use fcfs or priority")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["native"] = sorted(self.native)
        return data
