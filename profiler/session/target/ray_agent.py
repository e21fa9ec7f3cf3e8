"""The Ray actor that samples one node's server processes with py-spy, in chunks the driver collects as they finish.

Standard library only: it is sent to each node by value (ray_agents.py registers this module with Ray's
cloudpickle), so a node needs py-spy and Ray, nothing of infer-prof. py-spy runs for CHUNK_S at a time per
pid and starts again, so a node that dies mid-run loses at most the chunk it was in: the driver has the rest.
The py-spy command comes from the driver (collectors.sampling.py_spy_command) with PID_SLOT and OUTPUT_SLOT
for each pid and its output file; only the executable is this node's own.

With `--probe`, the agent also hands over, once the load is over, the files the in-process probe
(profiler/inject/sitecustomize.py) wrote on this node for its pids and their children: read from the folder
each process's own INFER_PROF_PROBE_DIR names (its /proc environ), else the driver's probe folder where this
node sees that path; with readings of this node's perf_counter_ns (the probe's clock) for the driver to align.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TypedDict

PID_SLOT, OUTPUT_SLOT = "{pid}", "{output}"
STOP_WAIT_S = 30.0  # py-spy writes its output on SIGINT; one that takes longer is killed
PROBE_DIR_ENV = "INFER_PROF_PROBE_DIR"  # inject.PROBE_DIR_ENV: this module imports nothing of infer-prof
# The probe's files of one process, by the name read_probe gives each: its status, spans, and a slowdown run's rest.
PROBE_FILES = {
    "probe": "probe-{pid}.json",
    "spans": "spans-{pid}.tsv",
    "sizes": "sizes-{pid}.tsv",
    "delays": "delays-{pid}.tsv",
    "turns": "turns-{pid}.tsv",
}
FAILURES_TO_GIVE_UP = 2  # chunks in a row without samples (after the native one): that pid is left alone
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """py-spy between fork and exec: SIGKILL when the agent's sampling thread ends (the actor killed, its
    node stopped), so no py-spy outlives its agent on any node (profiler/orphans.py, without infer-prof)."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def find_py_spy() -> tuple[str | None, str]:
    """This node's py-spy (on PATH, else beside this Python), or None and why."""
    found = shutil.which("py-spy")
    if found:
        return found, f"on PATH at {found}"
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside), f"beside Python at {beside}"
    return (
        None,
        f"py-spy is not on PATH nor beside this node's Python ({sys.executable}): pip install py-spy there",
    )


def failure_line(log: str, pid: int) -> str:
    """py-spy's own reason, on one line ("Error: ..." and its first cause), else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    error = next((line for line in lines if line.startswith("Error:")), None)
    if error is None:
        return f"py-spy on pid {pid} wrote no samples: {lines[-1] if lines else 'no output'}"
    cause = next((line for line in lines if re.match(r"^0:", line)), None)
    reason = error[len("Error:") :].strip() + (f" ({cause[2:].strip()})" if cause else "")
    if re.search(r"[Pp]ermission|ptrace|Operation not permitted", log):
        reason += " (needs ptrace permission on that node: CAP_SYS_PTRACE, or kernel.yama.ptrace_scope=0)"
    return f"py-spy could not attach to pid {pid}: {reason}"


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def probe_dir_of(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The probe folder a process was started with (INFER_PROF_PROBE_DIR in its environment), where readable."""
    try:
        environ = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = PROBE_DIR_ENV.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace") or None
    return None


def with_descendants(pids: list[int], proc: Path = Path("/proc")) -> list[int]:
    """`pids` and every live process under them on this node (a worker's own children load the probe too)."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.append(pid)
            todo.extend(children.get(pid, []))
    return sorted(found)


def read_probe_files(
    pids: list[int], folders: list[str], max_bytes: int, proc: Path = Path("/proc")
) -> dict[str, Any]:
    """The probe's files of `pids` (and their children) on this node, as text, from the folders their own
    environment names, then `folders`; at most max_bytes in all (a file cut there keeps its whole lines)."""
    wanted = with_descendants(pids, proc)
    named = [folder for pid in wanted if (folder := probe_dir_of(pid, proc))]
    candidates = list(dict.fromkeys([*named, *folders]))
    files: dict[int, dict[str, str]] = {}
    notes: list[str] = []
    budget = max_bytes
    for folder in candidates:
        if not os.path.isdir(folder):
            continue
        for pid in wanted:
            for kind, pattern in PROBE_FILES.items():
                if kind in files.get(pid, {}):
                    continue  # the first folder that holds it wins
                path = os.path.join(folder, pattern.format(pid=pid))
                try:
                    with open(path, "rb") as handle:
                        data = handle.read(budget + 1)
                except FileNotFoundError:
                    continue
                except OSError as error:
                    notes.append(f"{path}: {error}")
                    continue
                if len(data) > budget:
                    data = data[: data.rfind(b"\n", 0, budget) + 1]
                    notes.append(f"{path}: cut at {max_bytes} bytes of probe files in all")
                budget -= len(data)
                if data:
                    files.setdefault(pid, {})[kind] = data.decode(errors="replace")
    return {
        "hostname": os.uname().nodename,
        "pids": wanted,
        "folders": [folder for folder in candidates if os.path.isdir(folder)],
        "looked_in": candidates,
        "files": files,
        "notes": notes,
    }


class AgentHello(TypedDict):
    """NodeAgent.hello(): the node as its agent sees it."""

    hostname: str
    agent_pid: int
    py_spy: str | None  # its path, None when the node has none
    py_spy_where: str  # where it was found, or why not
    time_ns: int


class SpyChunk(TypedDict):
    """One py-spy run of CHUNK_S on one process (NodeAgent._read): its raw stacks and how it went."""

    pid: int
    chunk: int
    native: bool
    started_ns: int  # the node's time.time_ns() as py-spy started, and as it ended
    ended_ns: int
    raw_text: str
    samples: int | None  # py-spy's own count, when its log says it
    errors: int
    error: str | None  # why the chunk has no stacks


class NodeAgent:
    """One node's sampler: hello() and clock() answer at once; start() begins the chunks, collect() hands over
    those finished since the last call, stop() ends the one running and hands over the rest."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.py_spy, self.py_spy_where = find_py_spy()
        self.folder: Path | None = (
            None  # made when sampling starts: an agent that never samples leaves nothing
        )
        self.finished: list[SpyChunk] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.running: dict[int, subprocess.Popen[bytes]] = {}

    def hello(self) -> AgentHello:
        """This node as the agent sees it: its host, its own pid, py-spy (or why not) and its clock."""
        return {
            "hostname": os.uname().nodename,
            "agent_pid": os.getpid(),
            "py_spy": self.py_spy,
            "py_spy_where": self.py_spy_where,
            "time_ns": time.time_ns(),
        }

    def clock(self) -> int:
        return time.time_ns()

    def perf_clock(self) -> int:
        """This node's perf_counter_ns, the probe's clock (CLOCK_MONOTONIC: one for every process of the node)."""
        return time.perf_counter_ns()

    def probe_files(self, pids: list[int], folders: list[str], max_bytes: int) -> dict[str, Any]:
        return read_probe_files(pids, folders, max_bytes)

    def start(self, pids: list[int]) -> None:
        if self.py_spy is None or self.thread is not None:
            return
        self.folder = Path(tempfile.mkdtemp(prefix="infer-prof-ray-agent-"))
        self.thread = threading.Thread(target=self._sample, args=(list(pids),), daemon=True)
        self.thread.start()

    def collect(self) -> list[SpyChunk]:
        with self.lock:
            chunks, self.finished = self.finished, []
        return chunks

    def stop(self) -> list[SpyChunk]:
        with self.lock:  # under the lock: no chunk starts once this is set
            self.stopping.set()
            running = list(self.running.values())
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)  # py-spy writes what it has on Ctrl-C
        if self.thread is not None:
            self.thread.join(STOP_WAIT_S + 5)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        return self.collect()

    def _sample(self, pids: list[int]) -> None:
        native = {pid: "--native" in self.command for pid in pids}
        failures = dict.fromkeys(pids, 0)  # consecutive chunks without samples
        chunk = 0
        while True:
            live = [pid for pid in pids if failures[pid] < FAILURES_TO_GIVE_UP and alive(pid)]
            chunk += 1
            started_ns = time.time_ns()
            with self.lock:
                if self.stopping.is_set() or not live:
                    return
                for pid in live:
                    self.running[pid] = self._spawn(pid, chunk, native[pid])
            for process in list(self.running.values()):
                self._wait(process)
            ended_ns = time.time_ns()
            with self.lock:
                self.running.clear()
            for pid in live:
                record = self._read(pid, chunk, native[pid], started_ns, ended_ns)
                if record["error"] is None:
                    failures[pid] = 0
                elif native[pid]:
                    native[pid] = (
                        False  # a process py-spy cannot unwind natively: Python frames only, next chunk
                    )
                else:
                    failures[pid] += 1
                with self.lock:
                    self.finished.append(record)

    def _wait(self, process: subprocess.Popen[bytes]) -> None:
        """Until py-spy ends its chunk, or, once stopping, until STOP_WAIT_S after the stop (then it is killed)."""
        deadline: float | None = None
        while True:
            try:
                process.wait(timeout=0.25)
                return
            except subprocess.TimeoutExpired:
                if not self.stopping.is_set():
                    continue
                deadline = deadline or time.monotonic() + STOP_WAIT_S
                if time.monotonic() > deadline:
                    process.kill()
                    process.wait()
                    return

    def _spawn(self, pid: int, chunk: int, native: bool) -> subprocess.Popen[bytes]:
        assert self.py_spy is not None and self.folder is not None
        output = self.folder / f"{pid}-{chunk}.txt"
        argv = [self.py_spy] + [
            str(pid) if part == PID_SLOT else str(output) if part == OUTPUT_SLOT else part
            for part in self.command[1:]
        ]
        if not native:
            argv = ["--nonblocking" if part == "--native" else part for part in argv]
        log = open(self.folder / f"{pid}-{chunk}.log", "wb")  # closed once py-spy holds it
        try:
            return subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
                env={**os.environ, "RUST_BACKTRACE": "0"},
            )
        finally:
            log.close()

    def _read(self, pid: int, chunk: int, native: bool, started_ns: int, ended_ns: int) -> SpyChunk:
        assert self.folder is not None
        output, log_path = self.folder / f"{pid}-{chunk}.txt", self.folder / f"{pid}-{chunk}.log"
        raw = output.read_text(errors="replace") if output.exists() else ""
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        for path in (output, log_path):
            path.unlink(missing_ok=True)
        summary = re.findall(r"Samples:\s*(\d+)\s+Errors:\s*(\d+)", log)
        return {
            "pid": pid,
            "chunk": chunk,
            "native": native,
            "started_ns": started_ns,
            "ended_ns": ended_ns,
            "raw_text": raw,
            "samples": int(summary[-1][0]) if summary else None,
            "errors": int(summary[-1][1]) if summary else 0,
            "error": None if raw.strip() else failure_line(log, pid),
        }
