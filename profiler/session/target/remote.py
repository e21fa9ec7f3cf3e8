"""The profile window of a remote `infer-prof serve`: opened before the load, closed (and read back) after it."""

from __future__ import annotations

from typing import Any

import httpx

from ....errors import TargetError, parse_json

WINDOW_TIMEOUT_S = 120.0  # closing summarizes every span of the run on the server


class RemoteWindow:
    """POST /infer-prof/profile/start and /stop; a failure is a note, never a failed run."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.error: str | None = None

    def start(self) -> bool:
        return self._post("start") is not None

    def stop(self) -> dict[str, Any] | None:
        return self._post("stop")

    def _post(self, what: str) -> dict[str, Any] | None:
        try:
            response = httpx.post(f"{self.base}/infer-prof/profile/{what}", timeout=WINDOW_TIMEOUT_S)
            response.raise_for_status()
            data = parse_json(response.content, f"POST /infer-prof/profile/{what}", TargetError)
            if not isinstance(data, dict):
                raise TargetError(
                    f"POST /infer-prof/profile/{what} answered {type(data).__name__}, not an object"
                )
            return data
        except (httpx.HTTPError, TargetError) as exc:
            self.error = f"the server's profile window could not {what}: {type(exc).__name__}: {exc}"
            return None
