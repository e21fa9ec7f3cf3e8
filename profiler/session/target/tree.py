"""A server's process tree on this machine, read from /proc: who listens on a port, the tree around a pid, which processes are Python, and what each one does."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ....errors import TargetError
from ...rundir.schema import TargetProcess

PROC = Path("/proc")
CMDLINE_CHARS = 160  # enough to recognise a server's command, short enough for a table
LISTEN_STATE = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column


@dataclass(slots=True)
class ProcessInfo:
    """One process of a server's tree, and what it was found to do."""

    pid: int
    ppid: int
    title: str  # /proc/PID/comm: the name prctl/setproctitle give it (vLLM: VLLM::EngineCore)
    cmdline: str  # truncated to CMDLINE_CHARS
    python: bool
    listening: bool = False  # holds the target's listening socket
    role: str = "unknown"
    role_source: str = "no rule matches its title or command line"

    def to_dict(self) -> TargetProcess:
        """The process table row's first keys (session.target.processes), in the fields' order."""
        return {
            "pid": self.pid,
            "ppid": self.ppid,
            "title": self.title,
            "cmdline": self.cmdline,
            "python": self.python,
            "listening": self.listening,
            "role": self.role,
            "role_source": self.role_source,
        }


# Process roles by title or command line, first match wins: (pattern, role). vLLM v1 names its processes with
# setproctitle; single-process servers (llama-cpp-python, transformers serve) run the API and the loop together.
ROLE_RULES: tuple[tuple[str, str], ...] = (
    (
        r"^(sh|bash|dash|zsh)$",
        "shell (starts the server)",
    ),  # first: --launch's /bin/sh -c holds the whole command
    (r"VLLM::EngineCor", "engine core"),  # comm keeps 15 characters of VLLM::EngineCore
    (r"VLLM::Worker", "model worker"),
    (r"VLLM::APIServer|vllm\.entrypoints|vllm serve", "API server"),
    (r"VLLM::DPCoordin", "data-parallel coordinator"),
    # Ray's workers title themselves ray::<actor class>: vLLM's Ray executor's model workers, when Ray runs them
    # under the server (a cluster it started itself); elsewhere they are found with --ray-address (ray_processes)
    (r"ray::RayWorkerW", "model worker"),
    (r"ray::IDLE", "idle helper (idle Ray worker)"),
    (r"^ray::", "Ray worker"),
    (r"llama_cpp\.server", "API server + engine loop"),
    (r"transformers serve|transformers_cli.* serve", "API server + engine loop"),
    (r"infer-prof serve|profiler\.cli serve", "API server + engine loop"),
    (r"multiprocessing\.resource_tracker|resource_tracker", "idle helper (multiprocessing resource tracker)"),
    (r"multiprocessing\.forkserver", "idle helper (multiprocessing fork server)"),
    (r"tokeniz", "tokenizer"),
)


def assign_role(process: ProcessInfo, port: int | None = None) -> None:
    """Name what the process does from its title and command line, else from its listening socket."""
    for pattern, role in ROLE_RULES:
        for where, text in (("process title", process.title), ("command line", process.cmdline)):
            if match := re.search(pattern, text):
                process.role, process.role_source = role, f"{where} {match.group(0)!r}"
                return
    if process.listening:
        process.role = "API server"
        process.role_source = (
            f"listens on the target's port {port}" if port else "listens on the target's port"
        )
        return
    process.role, process.role_source = (
        "unknown",
        f"no rule matches its title {process.title!r} or command line",
    )


def parse_listeners(text: str, port: int) -> set[int]:
    """Socket inodes listening on `port` in the text of /proc/net/tcp or tcp6."""
    inodes = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN_STATE:
            continue
        try:
            if int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(int(fields[9]))
        except ValueError:
            continue
    return inodes


def pids_listening(port: int, proc: Path = PROC) -> list[int]:
    """Processes on this machine holding a socket that listens on `port` (those this user may read)."""
    inodes: set[int] = set()
    for name in ("tcp", "tcp6"):
        try:
            inodes |= parse_listeners((proc / "net" / name).read_text(), port)
        except OSError:
            continue
    if not inodes:
        return []
    wanted = {f"socket:[{inode}]" for inode in inodes}
    return sorted(pid for pid in all_pids(proc) if any(target in wanted for target in fd_targets(pid, proc)))


def fd_targets(pid: int, proc: Path = PROC) -> Iterator[str]:
    """What each open file descriptor of the process names (`socket:[INODE]`, a path...), those this user may read."""
    try:
        links = os.scandir(proc / str(pid) / "fd")
    except OSError:
        return
    with links:
        for link in links:
            try:
                yield os.readlink(link.path)
            except OSError:
                continue


def all_pids(proc: Path = PROC) -> list[int]:
    try:
        return [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []


def parent_of(pid: int, proc: Path = PROC) -> int | None:
    """The parent pid from /proc/PID/stat (None when the process is gone)."""
    try:
        return int((proc / str(pid) / "stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def parents(proc: Path = PROC) -> dict[int, int]:
    """Every live process's parent, in one pass over /proc."""
    table = {}
    for pid in all_pids(proc):
        ppid = parent_of(pid, proc)
        if ppid is not None:
            table[pid] = ppid
    return table


def descendants(root: int, table: dict[int, int]) -> list[int]:
    """`root` and every process below it, parents before children."""
    children: dict[int, list[int]] = {}
    for pid, ppid in table.items():
        children.setdefault(ppid, []).append(pid)
    order, stack = [], [root]
    while stack:
        pid = stack.pop()
        order.append(pid)
        stack.extend(sorted(children.get(pid, []), reverse=True))
    return order


def ancestors(pid: int, table: dict[int, int]) -> list[int]:
    """The parents of `pid`, nearest first, up to (not including) pid 0."""
    chain, seen = [], {pid}
    while (pid := table.get(pid, 0)) > 0 and pid not in seen:
        chain.append(pid)
        seen.add(pid)
    return chain


def is_python(pid: int, proc: Path = PROC) -> bool:
    """Whether the process runs a Python interpreter: its executable, else a libpython it maps."""
    try:
        if re.match(r"(python|pypy)", os.path.basename(os.readlink(proc / str(pid) / "exe"))):
            return True
    except OSError:
        pass
    try:
        with open(proc / str(pid) / "maps", errors="replace") as maps:
            return any("libpython" in line for line in maps)
    except OSError:
        return False


def read_process(pid: int, proc: Path = PROC) -> ProcessInfo | None:
    """What /proc says about `pid`; None when it is gone (or was never there)."""
    ppid = parent_of(pid, proc)
    if ppid is None:
        return None
    try:
        title = (proc / str(pid) / "comm").read_text().strip()
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    cmdline = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    if len(cmdline) > CMDLINE_CHARS:
        cmdline = cmdline[: CMDLINE_CHARS - 1] + "…"
    return ProcessInfo(pid=pid, ppid=ppid, title=title, cmdline=cmdline, python=is_python(pid, proc))


def running(pid: int, proc: Path = PROC) -> bool:
    """Whether the process is there and not a zombie (dead, its status not yet read by its parent)."""
    try:
        return (proc / str(pid) / "stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def tree_top(pid: int, table: dict[int, int], proc: Path = PROC) -> int:
    """The highest Python process above `pid` that is still the server's: climbing stops below a process
    that is not Python (a shell, a terminal) and below this process or its own ancestors (a test runner)."""
    ours = {os.getpid(), *ancestors(os.getpid(), table)}
    top = pid
    for parent in ancestors(pid, table):
        if parent in ours or parent == 1 or not is_python(parent, proc):
            break
        top = parent
    return top


@dataclass(slots=True)
class ServerTree:
    """The process tree to sample: its root, how it was found, and a note when a check could not be made."""

    root: int
    source: str  # "--pid", "port N", "--launch" or "infer-prof serve"
    port: int | None
    listeners: list[int]
    note: str | None = None


def find_server_tree(
    pid: int | None, port: int | None, *, source: str = "--pid", proc: Path = PROC
) -> ServerTree:
    """The tree holding --pid (any process of the server) or, without one, the process listening on `port`.

    TargetError when --pid is no process, is not Python, or is outside the tree of the port's listener;
    and when no pid is given and nothing here listens on the port."""
    table = parents(proc)
    listeners = pids_listening(port, proc) if port is not None else []
    if pid is None:
        if not listeners:
            raise TargetError(
                f"no process on this machine listens on port {port}: start the server, or give its "
                "process with --pid"
            )
        tops = {tree_top(listener, table, proc) for listener in listeners}
        root = max(tops, key=lambda top: len(descendants(top, table)))
        return ServerTree(root, f"port {port}", port, listeners)
    process = read_process(pid, proc)
    if process is None:
        raise TargetError(
            f"--pid {pid}: no such process on this machine; give the pid of a process of the server"
        )
    if not process.python:
        raise TargetError(
            f"--pid {pid} ({process.title}) is not a Python process: py-spy samples Python only; give "
            "a Python process of the server, or leave --pid out to find it by its port"
        )
    root = tree_top(pid, table, proc)
    if port is None or not listeners:
        why = (
            "the target is not on this machine"
            if port is None
            else f"no process here is seen listening on port {port}"
        )
        return ServerTree(
            root, "--pid", port, listeners, note=f"{why}: --pid {pid} was not checked against it"
        )
    above = [listener for listener in listeners if listener in ancestors(pid, table)]
    if above:  # a listener above a process that is not Python (a shell between them): the tree starts there
        root = tree_top(above[0], table, proc)
    elif not set(descendants(root, table)) & set(listeners):
        raise TargetError(
            f"--pid {pid} ({process.title}) is not the server: neither it nor its process tree listens "
            f"on port {port} (pid {', '.join(map(str, listeners))} does); give a pid of that server, or "
            "leave --pid out"
        )
    return ServerTree(root, "--pid", port, listeners)


def tree_pids(root: int, proc: Path = PROC) -> list[int]:
    """`root` and its descendants, parents first: from the kernel's per-thread children lists where it keeps them
    (a few reads however busy the machine), else from every process's parent."""
    if not (proc / str(root) / "task").is_dir():
        return []
    if not (proc / str(root) / "task" / str(root) / "children").exists():
        return descendants(root, parents(proc))
    order, stack = [], [root]
    while stack:
        pid = stack.pop()
        order.append(pid)
        children: set[int] = set()
        try:
            for task in os.scandir(proc / str(pid) / "task"):
                try:
                    children.update(
                        int(child) for child in (Path(task.path) / "children").read_text().split()
                    )
                except (OSError, ValueError):
                    continue
        except OSError:
            continue
        stack.extend(sorted(children, reverse=True))
    return order


def tree_processes(root: int, proc: Path = PROC) -> list[ProcessInfo]:
    """The live processes of the tree under `root`, parents first."""
    found = []
    for pid in tree_pids(root, proc):
        process = read_process(pid, proc)
        if process is not None:
            found.append(process)
    return found
