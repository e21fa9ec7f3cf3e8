"""`run --target/--launch --ray-address`: the Ray cluster whose actors are the server's workers, checked within seconds and joined as a driver.

Off unless asked: `--ray-address HOST:PORT` (or `auto`, the cluster this machine belongs to), else the
RAY_ADDRESS the user's shell exports, as every Ray program reads it; `--ray-address off` ignores that. The
address is checked before any server starts (profiler.inputs.addresses: its form, then a TCP connect bounded
by a few seconds), then asked for an HTTP/2 answer, since Ray's control store speaks gRPC: a port that
listens but is something else (the server's own HTTP port) is refused at once, where Ray would retry for a
minute.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ....errors import OptionError, TargetError
from ...inputs.addresses import (
    CONNECT_TIMEOUT_S,
    auto_ray_address,
    parse_ray_address,
    try_connect,
)

ENV_VAR = "RAY_ADDRESS"
OFF = "off"
NAMESPACE = "infer-prof"
# The HTTP/2 client preface and an empty SETTINGS frame: a gRPC server answers with its own SETTINGS frame.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 0x04


@dataclass(frozen=True, slots=True)
class RayAddress:
    """The cluster to join: its address as Ray takes it, and where it came from (the flag, or RAY_ADDRESS)."""

    host: str
    port: int
    given: str  # as the user wrote it ("auto" included)
    source: str  # "--ray-address" or "RAY_ADDRESS"

    @property
    def text(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def flag(self) -> str:
        """How a message names it: `--ray-address X`, or `RAY_ADDRESS=X`."""
        return (
            f"--ray-address {self.given}" if self.source == "--ray-address" else f"RAY_ADDRESS={self.given}"
        )


def chosen_address(flag: str | None, environ: Mapping[str, str] = os.environ) -> RayAddress | None:
    """The cluster a run reads workers from, or None (off); OptionError for an address of the wrong form."""
    if flag is None:
        given, source = environ.get(ENV_VAR, "").strip(), ENV_VAR
        if not given:
            return None
    else:
        given, source = flag.strip(), "--ray-address"
    name = f"--ray-address {given}" if source == "--ray-address" else f"{ENV_VAR}={given}"
    if given == OFF:
        return None
    if given == "local":
        raise OptionError(f"{name}: a new local cluster holds none of the server's workers; give its address")
    if given.startswith("ray://"):
        raise OptionError(
            f"{name}: the workers are read as a driver of the cluster, not through Ray Client: give the head's "
            "address HOST:PORT (the one `ray start --head` printed, port 6379 by default)"
        )
    if given == "auto":
        found = auto_ray_address()
        if found is None:
            raise OptionError(
                f"{name}: no Ray cluster is recorded on this machine (no RAY_ADDRESS, no `ray start` here); "
                "give the head's address HOST:PORT"
            )
        return RayAddress(found.host, found.port, given, source)
    try:
        parsed = parse_ray_address(given)
    except OptionError:
        raise OptionError(
            f"{name}: use HOST:PORT (the head's address, port 6379 by default), auto, or off"
        ) from None
    assert parsed is not None  # auto and local were answered above
    return RayAddress(parsed.host, parsed.port, given, source)


def check_address(address: RayAddress, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """OptionError within seconds when nothing listens there, or what listens does not speak gRPC."""
    fix = "start the cluster (`ray start --head`), or give its head's address with --ray-address"
    try_connect(
        address.host,
        address.port,
        f"{address.flag}: cannot reach a Ray cluster",
        fix=fix,
        timeout_s=timeout_s,
    )
    if not speaks_http2(address.host, address.port, timeout_s):
        raise OptionError(
            f"{address.flag}: {address.text} answers, but not as Ray's control store (no gRPC there): give the "
            "head's GCS address (port 6379 by default), not a dashboard's, client server's or HTTP server's"
        )


def speaks_http2(host: str, port: int, timeout_s: float) -> bool:
    """Whether host:port answers HTTP/2's preface with a SETTINGS frame, as every gRPC server does."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as connection:
            connection.settimeout(timeout_s)
            connection.sendall(_HTTP2_PREFACE)
            header = b""
            while len(header) < 9:
                more = connection.recv(9 - len(header))
                if not more:
                    return False
                header += more
    except OSError:
        return False
    return header[3] == _SETTINGS


def join(address: RayAddress) -> tuple[Any, bool]:
    """Join the cluster as a driver of its own job (our agents are its actors, gone when it ends): the ray
    module, and whether this call joined (and so must leave: ray.shutdown()). A Ray this process already
    joined is used as it is. TargetError when Ray refuses."""
    try:
        import ray
    except ImportError:
        raise OptionError(f"{address.flag}: Ray is not installed here: pip install ray") from None
    if ray.is_initialized():
        return ray, False
    try:
        ray.init(
            address=address.text,
            namespace=NAMESPACE,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        first = next(iter(str(error).strip().splitlines()), type(error).__name__)
        raise TargetError(f"{address.flag}: Ray could not join the cluster ({first})") from None
    return ray, True
