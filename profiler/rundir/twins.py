"""Which C twins a recorded run had on, from its config, in words: nothing is predicted for a twin that already ran."""

from __future__ import annotations

from collections.abc import Iterable

from .components import NATIVE_CAPABLE
from .schema import Config

# `--native core` is one fused C call for these three (native_paths.toggles.FUSED; rundir may not import it).
FUSED = ("scheduler", "kv_alloc", "prepare")
ORDER = NATIVE_CAPABLE


def expand(names: Iterable[str]) -> list[str]:
    """Component names with `core` spelled out as the three it fuses, in the components' order."""
    wanted: set[str] = set()
    for name in names:
        wanted.update(FUSED if name == "core" else (name,))
    return [name for name in ORDER if name in wanted] + sorted(wanted - set(ORDER))


def twins_on(config: Config) -> list[str]:
    """The components whose C twin ran in this run (config.native: what loaded, not what was asked for)."""
    return expand(config.get("native") or [])


def twins_sentence(config: Config) -> str | None:
    """One line for the headline naming the C twins that were on, None for an all-Python run."""
    names = twins_on(config)
    if not names:
        return None
    return (
        f"C twins on in this run: {', '.join(names)}; their time is native code already, so nothing is "
        "predicted for them and the largest control path is picked among the Python ones."
    )
