"""What --verify's twin switch and --what-if's slowdowns hand the run they ride on, and the run-again callable both take."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ...engine.engine import Engine
    from ..session.session import SessionOutcome


class RunHook(Protocol):
    """Installed in the built engine before it starts; started once the run's collectors run (its turns begin)."""

    def install(self, engine: Engine) -> None: ...

    def start(self, _collectors: object = None) -> None: ...


# (native twins, run dir, label, a hook to install or None) -> the run's outcome: the CLI's _run_again
RunAgain = Callable[[frozenset[str], Path, str, "RunHook | None"], "SessionOutcome"]
