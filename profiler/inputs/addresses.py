"""The one check of an external address (a `--target` URL, a `--ray` cluster): its form first, then a TCP connect
bounded by a few seconds, so a wrong address is one line and exit 2 within seconds, never a hang in a retry loop."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ...errors import InferProfError, OptionError, TargetError

# A connect to a listening port on a reachable host takes milliseconds, even across a continent; a few seconds
# tell "nothing there" (a filtered port, an address that routes nowhere) from "slow".
CONNECT_TIMEOUT_S = 3.0
_HOSTNAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,252})")
_RAY_FORM = "auto (the cluster this machine is in), local (start one here) or a cluster address HOST:PORT (or ray://HOST:PORT)"
# Where `ray start` records the cluster this machine belongs to (what ray.init(address="auto") reads).
RAY_CURRENT_CLUSTER = Path("/tmp/ray/ray_current_cluster")


@dataclass(frozen=True, slots=True)
class HttpAddress:
    """A --target URL taken apart: scheme, host (an IPv6 literal without its brackets), port (80 or 443 when
    the URL names none), the host and port as written, and the path."""

    scheme: str
    host: str
    port: int
    netloc: str
    path: str  # without a trailing "/" or "/v1"

    @property
    def base(self) -> str:
        """The server's root as the user wrote it, e.g. http://127.0.0.1:8000 (what the probe and client use)."""
        return f"{self.scheme}://{self.netloc}{self.path}"


@dataclass(frozen=True, slots=True)
class HostPort:
    """A Ray cluster address taken apart; `ray` when it was given as ray://HOST:PORT (Ray's client server)."""

    host: str
    port: int
    ray: bool = False

    @property
    def text(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'ray://' if self.ray else ''}{host}:{self.port}"


def parse_http_url(url: str, option: str = "--target") -> HttpAddress:
    """An http(s) URL with a host and, where it names one, a port 1..65535; TargetError with the URL and the
    fix otherwise (a non-numeric port, a broken IPv6 literal, a space or control character, no host)."""
    example = "give e.g. http://127.0.0.1:8000"
    if not url or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise TargetError(f"{option} {url!r} is not an http(s) URL (empty, or a space in it): {example}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", "Port could not be cast to integer value", out of range
        raise TargetError(f"{option} {url!r} is not a valid URL ({exc}): {example}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TargetError(f"{option} {url!r} is not an http(s) URL: {example}")
    if parts.username is not None or parts.password is not None:
        raise TargetError(f"{option} {url!r}: a user or password in the URL is not supported: {example}")
    host = parts.hostname or ""
    _check_host(host, f"{option} {url!r}", TargetError)
    if port == 0:
        raise TargetError(f"{option} {url!r}: port 0 is no server's port: {example}")
    path = parts.path.rstrip("/").removesuffix("/v1")
    default = 443 if parts.scheme == "https" else 80
    return HttpAddress(parts.scheme, host, port or default, parts.netloc, path)


def parse_ray_address(address: str) -> HostPort | None:
    """None for "auto" and "local"; else HOST:PORT or ray://HOST:PORT taken apart (OptionError when it is
    neither)."""
    if address in ("auto", "local"):
        return None
    text, ray = (address[len("ray://") :], True) if address.startswith("ray://") else (address, False)
    host, _, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise OptionError(f"--ray {address}: use {_RAY_FORM}")
    _check_host(host, f"--ray {address}", OptionError)
    return HostPort(host, int(port_text), ray)


def auto_ray_address() -> HostPort | None:
    """The cluster `--ray auto` would join: RAY_ADDRESS, else the one `ray start` recorded here; None when
    there is none (Ray then says so at once)."""
    text = os.environ.get("RAY_ADDRESS", "").strip()
    if not text:
        try:
            text = RAY_CURRENT_CLUSTER.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
    if not text or text in ("auto", "local"):
        return None
    try:
        return parse_ray_address(text)
    except OptionError:
        return None  # not ours to judge: Ray reads it and says what is wrong


def try_connect(
    host: str,
    port: int,
    what: str,
    *,
    fix: str = "check the address and the port",
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> None:
    """OptionError naming `what` when nothing accepts a TCP connection at host:port within `timeout_s` (a
    refused port answers at once; an address that routes nowhere takes the whole timeout)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except socket.gaierror as exc:
        reason = f"the host name does not resolve ({exc.strerror or exc})"
    except TimeoutError:
        reason = f"no answer within {timeout_s:g} s"
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise OptionError(f"{what}: nothing listens at {host}:{port} ({reason}); {fix}")


def _check_host(host: str, where: str, error: type[InferProfError]) -> None:
    if not host:
        raise error(f"{where}: no host in it; give e.g. 127.0.0.1 or a host name")
    if ":" in host or host.replace(".", "").isdigit():
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            raise error(f"{where}: {host!r} is not an IP address") from None
        return
    if not _HOSTNAME.fullmatch(host) or ".." in host:
        raise error(f"{where}: {host!r} is not a host name")
