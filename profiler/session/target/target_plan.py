"""Before a `run --target` sends anything: which process tree to sample (from --pid, the target's port, a --launch'ed command or an `infer-prof serve`'s pid), and the tokenizer the prompts are sized with."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ....errors import TargetError
from ...collectors.registry import PROFILES
from ..options import OptionError
from .probe import ServerInfo
from .tree import ServerTree, find_server_tree


@dataclass
class TargetPlan:
    """What the session will do, decided before any load is sent."""

    server: ServerInfo
    pid: int | None  # the root of the process tree sampled
    pid_source: str | None  # "--pid", "port N", "--launch" or "infer-prof serve"
    split_unavailable: str | None  # why no split can be measured, known up front
    tree: ServerTree | None = None


def target_port(url: str) -> int:
    """The TCP port of a target URL (80 or 443 when it names none)."""
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def plan_target(
    server: ServerInfo, pid: int | None, profile: str, *, launched: int | None = None
) -> TargetPlan:
    """Which process tree to sample: the --launch'ed command's, the tree holding --pid, our server's, or the one
    listening on the target's port. OptionError for a --pid that is no process here; TargetError for a --pid that
    is not Python or not the server's."""
    if profile not in PROFILES:
        raise OptionError(f"--profile={profile!r}: use one of {', '.join(PROFILES)}")
    if pid is not None and (pid <= 0 or not os.path.exists(f"/proc/{pid}")):
        raise OptionError(f"--pid {pid}: no such process on this machine; give the pid of the server process")
    port = target_port(server.url) if server.local else None
    if launched is not None:
        tree = ServerTree(launched, "--launch", port, [])
    elif pid is not None:
        tree = find_server_tree(pid, port)
    elif server.pid is not None:
        tree = ServerTree(server.pid, "infer-prof serve", port, [server.pid])
    elif port is not None and profile != "off":
        try:
            tree = find_server_tree(None, port)
        except (
            TargetError
        ) as error:  # a server in a container or behind a proxy: measure the client side only
            return TargetPlan(
                server, None, None, None if server.ours else f"{error} (py-spy has no process to attach to)"
            )
    else:
        reason = (
            "the server is not on this machine: py-spy has no process to attach to (run infer-prof where the "
            "server runs, or use --launch)"
        )
        return TargetPlan(
            server, None, None, "--profile off" if profile == "off" else None if server.ours else reason
        )
    return TargetPlan(server, tree.root, tree.source, "--profile off" if profile == "off" else None, tree)


def check_prompt_model(model: str) -> None:
    """--model names a tokenizer infer-prof has (ModelNotFoundError if not), checked by name and path alone, before
    a server starts or a request is sent: loading the tokenizer itself takes seconds, and is done after."""
    from ....engine.catalog import DEFAULT_MODEL, SYNTHETIC_PREFIX, SYNTHETIC_SHAPES, list_models
    from ....errors import ModelNotFoundError

    if model == DEFAULT_MODEL or (
        model.startswith(SYNTHETIC_PREFIX) and model[len(SYNTHETIC_PREFIX) :] in SYNTHETIC_SHAPES
    ):
        return
    path = Path(model).expanduser()
    if model.endswith(".gguf") or path.exists():
        if not path.exists():
            raise ModelNotFoundError(f"model file {model!r} does not exist: check the path")
        if not path.is_file():
            raise ModelNotFoundError(f"model path {model!r} is not a file: give the path of a .gguf file")
        return
    names = ", ".join(name for name, _ in list_models())
    raise ModelNotFoundError(f"unknown model {model!r}: valid names are {names}")


@functools.cache  # tokenizers are immutable; reading one from a GGUF takes seconds
def prompt_tokenizer(model: str):
    """The tokenizer prompts are sized with: the --model GGUF's, else SmolLM2's (synthetic models use it too).
    ModelNotFoundError for a name no model has (a typo would otherwise size prompts with SmolLM2's silently)."""
    from ....engine.loader import describe_model, find_smollm2
    from ....engine.tokenizer import Tokenizer

    describe_model(model)
    if model.endswith(".gguf") or Path(model).expanduser().is_file():
        return Tokenizer.from_gguf(Path(model).expanduser())
    path, _where = find_smollm2(lambda message: None)
    return Tokenizer.from_gguf(path)
