"""Who is behind a --target URL: reachable, OpenAI-compatible, its model and name/version, and whether it is `infer-prof serve`."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from ....errors import TargetError
from ...inputs.addresses import CONNECT_TIMEOUT_S, parse_http_url
from ...inputs.replies import read_reply, reply_json
from ...rundir.schema import TargetServer

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
    info: dict[str, Any] | None = None  # /infer-prof/info's JSON as the server sent it (outside data)

    def to_dict(self) -> TargetServer:
        """result.json's target.server: the server's name and version, its model, and where name and version came from."""
        return {"name": self.name, "version": self.version, "model": self.model, "source": self.source}


def base_url(url: str) -> str:
    """The server's root: `http://host:port/v1` and `http://host:port/` both mean `http://host:port`; TargetError
    for a URL of the wrong form (profiler.inputs.addresses, the one check of an address)."""
    return parse_http_url(url).base


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
    source = f"--target {base}: GET /v1/models"
    try:
        with httpx.Client(timeout=httpx.Timeout(PROBE_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)) as client:
            response, body = read_reply(
                client, f"{base}/v1/models", source=source, deadline_s=PROBE_TIMEOUT_S
            )
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
    listing = reply_json(body, source)
    entries = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(entries, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"] for entry in entries
    ):
        raise TargetError(f"{source} did not return OpenAI's model list (data: a list of {{id: text}})")
    models = [entry["id"] for entry in entries]
    if not models and model is None:
        raise TargetError(
            f"--target {base}: the server lists no model under /v1/models; name the one it serves "
            "with --target-model NAME"
        )
    if model is not None and models and model not in models:
        raise TargetError(f"--target-model {model!r}: the server serves {', '.join(models)}")
    # An empty list with --target-model: some servers (transformers serve) list only their hub cache's models.
    owned_by = entries[0].get("owned_by") if models else None
    owned_by = owned_by if isinstance(owned_by, str) else None
    header = response.headers.get("server")
    name: str | None
    version: str | None
    if ours_info is not None:
        reported = ours_info.get("version")
        name, version, source = (
            "infer-prof serve",
            reported if isinstance(reported, str) else None,
            "/infer-prof/info",
        )
    elif header:
        name, _, version = header.partition("/")
        source = "the Server header"
    else:
        name, version, source = owned_by, None, "/v1/models owned_by"
    local = is_local(base)
    named = ours_info.get("pid") if ours_info and local else None
    # An info page of another shape names no process.
    pid = named if isinstance(named, int) and not isinstance(named, bool) and named > 0 else None
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
    source = f"--target {base}: GET /infer-prof/info"
    try:
        response, body = read_reply(
            client, f"{base}/infer-prof/info", source=source, deadline_s=PROBE_TIMEOUT_S
        )
        data = reply_json(body, source) if response.status_code == 200 else None
    except (httpx.HTTPError, TargetError):  # not ours, or a page of another shape: a foreign server
        return None
    return data if isinstance(data, dict) and data.get("name") == "infer-prof" else None
