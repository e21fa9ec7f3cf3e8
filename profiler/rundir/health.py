"""Reading a run's `health` section (written by profiler.analysis.health): is the run void, and why, in one phrase."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .schema import Health

VOID_BUSY = "the machine was busy"
VOID_SATURATED = "the engine was saturated"


def void_reason(health: Health | None) -> str | None:
    """Why a run cannot stand for its engine's performance ("the machine was busy" ...), None when healthy or unmeasured."""
    if not health:
        return None
    reason = health.get("void")
    if not reason:
        return None
    engine = health.get("engine_thread") or {}
    if reason == VOID_BUSY and engine.get("core_share") is not None:
        return f"{VOID_BUSY} (the engine thread got {engine['core_share']:.0%} of a core)"
    load = health.get("load") or {}
    if reason == VOID_SATURATED and load.get("delivered_ratio") is not None:
        return f"{VOID_SATURATED} (it completed {load['delivered_ratio']:.0%} of the offered requests/s)"
    return str(reason)
