"""The engine options every engine-building command shares, parsed and validated in one place."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from errors import OptionError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.I)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}  # fmt: skip


def parse_size(text: str, option: str = "--kv-memory") -> int:
    """Parse '512MiB', '1.5GB', '1048576' into bytes."""
    match = _SIZE.match(text or "")
    unit = (match.group(2) or "").lower() if match else ""
    if not match or unit not in _UNITS:
        raise OptionError(f"{option}={text!r} is not a size; use e.g. 256MiB, 1GiB or a byte count")
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise OptionError(f"{option}={text!r} must be positive")
    return value


@dataclass(slots=True)
class EngineOptions:
    """What to load and how to size the engine; mirrors the shared CLI options."""

    model: str = "smollm2-135m"
    dtype: str = "float32"
    native: frozenset[str] = field(default_factory=frozenset)
    kv_blocks: int | None = None
    kv_memory_bytes: int | None = None
    block_size: int = 16
    max_batch: int = 32
    max_batched_tokens: int = 512
    policy: str = "fcfs"
    seed: int = 0
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "bfloat16"):
            raise OptionError(f"--dtype={self.dtype!r}: use float32 or bfloat16")
        if self.kv_blocks is not None and self.kv_memory_bytes is not None:
            raise OptionError("--kv-blocks and --kv-memory both size the KV pool: give one of them")
        checks = {"--kv-blocks": self.kv_blocks, "--block-size": self.block_size, "--max-batch": self.max_batch,
                  "--max-batched-tokens": self.max_batched_tokens, "--threads": self.threads}  # fmt: skip
        for option, value in checks.items():
            if value is not None and value < 1:
                raise OptionError(f"{option}={value} must be at least 1")
        if self.policy not in ("fcfs", "priority"):
            raise OptionError(f"--policy={self.policy!r}: use fcfs or priority")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["native"] = sorted(self.native)
        return data
