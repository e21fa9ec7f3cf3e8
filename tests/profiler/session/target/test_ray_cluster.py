"""--ray-address: off unless given or exported, its form refused in one line, and an address where nothing listens, or something other than Ray's gRPC control store listens, refused before Ray is asked."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from infer_prof.errors import OptionError
from infer_prof.profiler.session.target.ray_cluster import RayAddress, check_address, chosen_address
from tests.profiler.session.target.conftest import free_port


def test_off_unless_given_or_exported() -> None:
    assert chosen_address(None, environ={}) is None
    assert chosen_address("off", environ={"RAY_ADDRESS": "10.0.0.1:6379"}) is None
    exported = chosen_address(None, environ={"RAY_ADDRESS": "10.0.0.1:6379"})
    assert exported == RayAddress("10.0.0.1", 6379, "10.0.0.1:6379", "RAY_ADDRESS")
    assert exported.flag == "RAY_ADDRESS=10.0.0.1:6379"
    given = chosen_address("[::1]:6380", environ={"RAY_ADDRESS": "10.0.0.1:6379"})
    assert given is not None and (given.text, given.flag) == ("[::1]:6380", "--ray-address [::1]:6380")


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("head", "use HOST:PORT"),
        ("head:0", "use HOST:PORT"),
        ("local", "a new local cluster holds none of the server's workers"),
        ("ray://head:10001", "not through Ray Client"),
    ],
)
def test_an_address_of_the_wrong_form_is_one_line_naming_the_flag(given: str, words: str) -> None:
    with pytest.raises(OptionError, match=f"^--ray-address {given}: .*{words}") as caught:
        chosen_address(given, environ={})
    assert "\n" not in str(caught.value)


def test_auto_with_no_cluster_recorded_here_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("infer_prof.profiler.session.target.ray_cluster.auto_ray_address", lambda: None)
    with pytest.raises(OptionError, match="no Ray cluster is recorded on this machine"):
        chosen_address("auto", environ={})


@contextmanager
def listener(reply: bytes) -> Iterator[int]:
    """A TCP server on a free port that answers every connection with `reply`, then closes it."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(5)

    def serve() -> None:
        try:
            while True:
                connection, _ = server.accept()
                with connection:
                    connection.recv(64)
                    connection.sendall(reply)
        except OSError:
            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def test_nothing_listening_is_refused_with_what_to_do() -> None:
    address = RayAddress("127.0.0.1", free_port(), "x", "--ray-address")
    with pytest.raises(OptionError, match="cannot reach a Ray cluster: nothing listens .*ray start --head"):
        check_address(address, timeout_s=2)


def test_a_port_that_is_not_ray_s_control_store_is_refused_at_once() -> None:
    with listener(b"HTTP/1.1 400 Bad Request\r\n\r\n") as port:
        address = RayAddress("127.0.0.1", port, f"127.0.0.1:{port}", "--ray-address")
        with pytest.raises(OptionError, match=r"answers, but not as Ray's control store \(no gRPC there\)"):
            check_address(address, timeout_s=2)


def test_a_grpc_server_s_settings_frame_passes() -> None:
    settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, no flags, stream 0
    with listener(settings) as port:
        check_address(RayAddress("127.0.0.1", port, "x", "--ray-address"), timeout_s=2)


def test_the_cli_refuses_a_wrong_cluster_in_one_line_before_any_server_is_asked(tmp_path: Path) -> None:
    from tests.cli.test_cli import assert_user_error, cli

    nowhere = cli(
        "run",
        "--target",
        "http://127.0.0.1:9",
        "--ray-address",
        f"127.0.0.1:{free_port()}",
        "--out",
        str(tmp_path / "a"),
    )
    assert_user_error(nowhere, "cannot reach a Ray cluster", "ray start --head")
    alone = cli("run", "--ray-address", "127.0.0.1:6379", "--out", str(tmp_path / "c"))
    assert_user_error(
        alone, "--ray-address reads a server's Ray workers: give --target URL or --launch CMD too"
    )
    assert not any((tmp_path / name).exists() for name in "ac")  # refused before a run directory is made


def test_ray_refusing_to_join_is_one_line_naming_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    from infer_prof.errors import TargetError
    from infer_prof.profiler.session.target.ray_cluster import join

    def refuse(**_: object) -> None:
        raise ConnectionError("Failed to connect to Ray cluster at 10.255.255.1:6379\nmore detail")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    address = RayAddress("10.255.255.1", 6379, "10.255.255.1:6379", "--ray-address")
    with pytest.raises(TargetError) as caught:
        join(address)
    assert str(caught.value) == (
        "--ray-address 10.255.255.1:6379: Ray could not join the cluster "
        "(Failed to connect to Ray cluster at 10.255.255.1:6379)"
    )
