"""Which native twins a recorded run asked for but ran without (its C library did not load), in words."""

from __future__ import annotations

from .schema import Config

# rundir may not import native_paths: the fix is spelled out here as native_paths.loader spells it.
NATIVE_FIX = "build the C twins with `python native_paths/build.py` (needs a C compiler; `infer-prof doctor` says what is missing) and record the run again"


def missing_native(config: Config) -> list[str]:
    """Names in config.native_requested that are not in config.native: their Python twins ran instead."""
    requested = set(config.get("native_requested") or [])
    return sorted(requested - set(config.get("native") or []))


def fallback_sentence(config: Config) -> str | None:
    """One sentence for a run's headline when native twins it asked for fell back to Python, else None."""
    missing = missing_native(config)
    if not missing:
        return None
    names = ", ".join(missing)
    return (
        f"Native {names} requested but not loaded: the Python twin ran instead, so this is not a native run"
    )


def refuse_fallback(config: Config, source: str, purpose: str) -> str | None:
    """The one-line refusal of a command that would call this run native (None when it is what it says)."""
    missing = missing_native(config)
    if not missing:
        return None
    return (
        f"{source}: asked for --native {','.join(missing)} but its C twin did not load and the Python twin ran, "
        f"so it cannot stand for a native run in {purpose}; {NATIVE_FIX}"
    )
