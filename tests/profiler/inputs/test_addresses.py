"""The one check of an external address: a --target URL's or a --ray cluster's form, then a bounded TCP try."""

from __future__ import annotations

import socket

import pytest

from infer_prof.errors import OptionError, TargetError
from infer_prof.profiler.inputs import addresses
from infer_prof.profiler.inputs.addresses import (
    HostPort,
    auto_ray_address,
    parse_http_url,
    parse_ray_address,
    try_connect,
)


@pytest.mark.parametrize(
    ("url", "base", "port"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000", 8000),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000", 8000),
        ("https://example.com", "https://example.com", 443),
        ("http://[::1]:9000/api/v1", "http://[::1]:9000/api", 9000),
        ("http://host_name.local", "http://host_name.local", 80),
    ],
)
def test_a_good_url_keeps_its_form_and_says_its_port(url: str, base: str, port: int) -> None:
    address = parse_http_url(url)
    assert (address.base, address.port) == (base, port)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:abc", "not a valid URL"),
        ("http://[::1/", "Invalid IPv6 URL"),
        ("http://[zz::1]:80", "not a valid URL"),
        ("http://999.1.1.1:80", "not an IP address"),
        ("http://127.0.0.1:70000", "not a valid URL"),
        ("http://127.0.0.1:0", "port 0"),
        ("http://u:p@127.0.0.1:80", "user or password"),
        ("http://a b:80", "a space in it"),
        ("http://", "not an http(s) URL"),
        ("ftp://127.0.0.1:21", "not an http(s) URL"),
        ("", "empty"),
    ],
)
def test_a_malformed_url_is_one_target_error_naming_it(url: str, words: str) -> None:
    with pytest.raises(TargetError, match=r"^--target ") as raised:
        parse_http_url(url)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_ray_addresses_parse_or_are_refused_by_form() -> None:
    assert parse_ray_address("auto") is None and parse_ray_address("local") is None
    assert parse_ray_address("10.0.0.1:6379") == HostPort("10.0.0.1", 6379, ray=False)
    assert parse_ray_address("ray://head:10001") == HostPort("head", 10001, ray=True)
    assert parse_ray_address("[::1]:6379") == HostPort("::1", 6379)
    for bad in ("sometimes", "h:0", "h:65536", ":6379", "a b:1", "999.0.0.1:1", "ray://", "h:port"):
        with pytest.raises(OptionError, match=r"^--ray "):
            parse_ray_address(bad)


def test_nothing_listening_is_refused_at_once_with_the_address() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: connect is refused, not timed out
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OptionError, match=rf"nothing listens at 127.0.0.1:{port} .*; start it"):
        try_connect("127.0.0.1", port, "--ray x", fix="start it", timeout_s=30)


def test_a_listening_port_passes() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        try_connect("127.0.0.1", server.getsockname()[1], "--ray x")


def test_a_connect_that_times_out_says_how_long_it_waited(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(address: tuple[str, int], timeout: float) -> socket.socket:
        raise TimeoutError

    monkeypatch.setattr(addresses.socket, "create_connection", never)
    with pytest.raises(OptionError, match=r"no answer within 2 s"):
        try_connect("10.0.0.1", 6379, "--ray 10.0.0.1:6379", timeout_s=2)


def test_auto_reads_ray_address_then_the_recorded_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    recorded = tmp_path / "ray_current_cluster"  # type: ignore[operator]
    monkeypatch.setattr(addresses, "RAY_CURRENT_CLUSTER", recorded)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert auto_ray_address() is None  # no cluster here: Ray says so itself, at once
    recorded.write_text("10.1.2.3:6379\n")
    assert auto_ray_address() == HostPort("10.1.2.3", 6379)
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert auto_ray_address() == HostPort("head", 10001, ray=True)
    monkeypatch.setenv("RAY_ADDRESS", "not an address")
    assert auto_ray_address() is None  # Ray reads it and says what is wrong
