"""Who is behind a --target URL: reachable, OpenAI-compatible, its model and name/version, and whether it is `infer-prof serve`."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from infer_prof.errors import TargetError

PROBE_TIMEOUT_S = 10.0


@dataclass(slots=True)
class ServerInfo:
    """What the probe found; `ours` servers also tell their pid and configuration."""

    url: str  # the base URL, without a trailing /v1
    model: str
    name: str | None  # from /infer-prof/info, the Server header, or the model's owned_by
    version: str | None
    source: str  # where name/version came from
    ours: bool
    local: bool  # the host is this machine (a pid found here is the server's)
    pid: int | None = None
    info: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def base_url(url: str) -> str:
    """The server's root: `http://host:port/v1` and `http://host:port/` both mean `http://host:port`."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TargetError(f"--target {url!r} is not an http(s) URL: give e.g. http://127.0.0.1:8000")
    path = parts.path.rstrip("/")
    path = path.removesuffix("/v1")
    return f"{parts.scheme}://{parts.netloc}{path}"


def is_local(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host in (socket.gethostname(), socket.getfqdn())
    return address.is_loopback


def probe(url: str, model: str | None = None) -> ServerInfo:
    """GET /v1/models (and /infer-prof/info); TargetError with the URL and the fix when it cannot be used."""
    base = base_url(url)
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_S) as client:
            response = client.get(f"{base}/v1/models")
            ours_info = _our_info(client, base)
    except httpx.HTTPError as exc:
        raise TargetError(
            f"--target {base}: cannot reach the server ({type(exc).__name__}: {exc}); start it "
            "(e.g. `infer-prof serve`) or fix the URL"
        ) from None
    if response.status_code != 200:
        raise TargetError(
            f"--target {base}: GET /v1/models answered {response.status_code}: not an OpenAI-compatible "
            "server, or the URL points below its root"
        )
    try:
        models = [entry["id"] for entry in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        raise TargetError(f"--target {base}: GET /v1/models did not return OpenAI's model list") from None
    if not models and model is None:
        raise TargetError(
            f"--target {base}: the server lists no model under /v1/models; name the one it serves "
            "with --target-model NAME"
        )
    if model is not None and models and model not in models:
        raise TargetError(f"--target-model {model!r}: the server serves {', '.join(models)}")
    # An empty list with --target-model: some servers (transformers serve) list only their hub cache's models.
    owned_by = (response.json()["data"][0] or {}).get("owned_by") if models else None
    header = response.headers.get("server")
    name: str | None
    if ours_info is not None:
        name, version, source = "infer-prof serve", ours_info.get("version"), "/infer-prof/info"
    elif header:
        name, _, version = header.partition("/")
        source = "the Server header"
    else:
        name, version, source = owned_by, None, "/v1/models owned_by"
    local = is_local(base)
    pid = ours_info.get("pid") if ours_info and local else None
    if pid is not None and not os.path.exists(f"/proc/{pid}"):
        pid = None  # the same address on another machine (a tunnel, a container): not a pid here
    return ServerInfo(
        url=base,
        model=model or models[0],
        name=name,
        version=version or None,
        source=source,
        ours=ours_info is not None,
        local=local,
        pid=pid,
        info=ours_info,
    )


def _our_info(client: httpx.Client, base: str) -> dict[str, Any] | None:
    try:
        response = client.get(f"{base}/infer-prof/info")
        data = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("name") == "infer-prof" else None
