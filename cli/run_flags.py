"""The `run` command's flags, as Typer annotations."""

from __future__ import annotations

from typing import Annotated, Optional, TypeAlias

import typer

ScenarioFlag: TypeAlias = Annotated[
    str,
    typer.Option(
        "--scenario",
        "-s",
        help="A built-in scenario name (see `infer-prof scenarios list`) or a path to a TOML file.",
    ),
]
RequestsFlag: TypeAlias = Annotated[
    Optional[int], typer.Option("--requests", "-r", help="Override the scenario's request count.")
]
DurationFlag: TypeAlias = Annotated[
    Optional[float], typer.Option("--duration", help="Stop submitting after this many seconds.")
]
OutFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option("--out", "-o", help="Run directory, new or empty (default runs/<timestamp>-<scenario>)."),
]
ReportFlag: TypeAlias = Annotated[
    bool, typer.Option("--report/--no-report", help="Write report.html, report.pdf and trace files.")
]
ProfileFlag: TypeAlias = Annotated[
    str,
    typer.Option(
        "--profile",
        help="Collectors: default (cheap, always-on), deep (native stacks sampled under SCHED_FIFO + torch.profiler windows that split kernel from torch's per-op fee; slow, for short runs), off.",
    ),
]
VerifyFlag: TypeAlias = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Also run with each predicted native path on and report predicted vs measured gain.",
    ),
]
LedgerFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--ledger",
        help="With --verify: the prediction ledger its predicted/measured pairs are appended to (default: INFER_PROF_LEDGER, else ledger.jsonl beside the run directory; `infer-prof ledger` scores it).",
    ),
]
WhatIfFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--what-if",
        help="Slowdown experiments (Coz's virtual speedup): COMPONENT,... of scheduler, kv_alloc, prepare, sampler, detokenizer. A second run delays each named component's every call by 0.5x and 1x its own time, in turns of steps with no delay between, and measures its sensitivity (added step time per added ms: 1 on the step's serial path, ~0 when it overlaps) and the gain a faster one would give; with --verify, beside the gain the C twin measures. With --launch CMD --probe: the probe delays the engine tables' components (e.g. sampler,scheduler,detokenizer) inside the server in turns of its own steps, and each prediction of the verdict says slowdown-measured or bound only.",
    ),
]
WhatIfRoundsFlag: TypeAlias = Annotated[
    Optional[int],
    typer.Option(
        "--what-if-rounds",
        help="With --what-if on the built-in engine: the most runs of the slowdown (default 3). Their pairs are pooled, and they stop as soon as every named component's sensitivity is known to ±20% (its interval's half width within a fifth of it), so a short scenario whose first run leaves one unresolved gets more turns; 1 to 10, 1 runs the slowdown once.",
        metavar="<int>",
    ),
]
PolicyFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--policy",
        help="Scheduling policy: fcfs or priority (default: priority when the scenario has priority classes, else fcfs).",
    ),
]
TargetFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--target",
        help="Send the scenario over HTTP to this OpenAI-compatible server (e.g. http://127.0.0.1:8000) instead of running the built-in engine; --model then only names the tokenizer prompts are sized with.",
    ),
]
PidFlag: TypeAlias = Annotated[
    Optional[int],
    typer.Option(
        "--pid",
        help="With --target: any process of the server (parent or child); py-spy samples every Python process of its tree (default: the tree of the process listening on the target's port).",
    ),
]
TargetModelFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--target-model",
        help="With --target: the model id to request (default: the first in /v1/models).",
    ),
]
VerboseFlag: TypeAlias = Annotated[
    bool, typer.Option("--verbose", help="Print every table of the summary, not one screen.")
]
LaunchFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--launch",
        help="Start this server command (quoted; run by /bin/sh in its own session), wait until it answers, profile its whole process tree, then stop it; its output goes to server.log in the run directory.",
    ),
]
PortFlag: TypeAlias = Annotated[
    Optional[int],
    typer.Option(
        "--port",
        help="The server's port on this machine: short for --target http://127.0.0.1:PORT (with --launch, default: the command's own --port).",
    ),
]
LaunchTimeoutFlag: TypeAlias = Annotated[
    Optional[float],
    typer.Option(
        "--launch-timeout",
        help="With --launch: seconds to wait for the server to answer /v1/models (default 600).",
    ),
]
ProbeFlag: TypeAlias = Annotated[
    bool,
    typer.Option(
        "--probe",
        help="With --launch: also time the engine's own functions (its step, scheduler, model, sampler, detokenizer; the engine tables name them) from inside every server process; the probe's own cost is measured in the run, by turns on and off.",
    ),
]
SwapFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--swap",
        help="With --launch CMD --probe: `sampler` puts infer-prof's C sampler in place of vLLM's CPU top-k/top-p sampling (vLLM 0.32.0, checked before the server starts), switched in and out by turns of steps; the run says what it changed per step (sampler ms, step ms, tokens/s, TPOT, with intervals and an A/A). With --what-if sampler in the same run, the slowdown's prediction for the swap's own speedup is put beside the gain the swap measured, and both go to the prediction ledger.",
    ),
]
RayAddressFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--ray-address",
        help="With --target or --launch: the Ray cluster (its head's HOST:PORT, or auto) whose actors are the server's workers (vLLM's --distributed-executor-backend ray): each is found through Ray's state, sampled with py-spy on its own node, and read beside the server's process tree. Default: $RAY_ADDRESS when set; `off` ignores it.",
    ),
]
ReplicaFlag: TypeAlias = Annotated[
    Optional[list[str]],
    typer.Option(
        "--replica",
        help="With --target or --launch of a router: a server behind it on this machine (repeat for each); each replica's process tree is sampled, its engine loop split, and the run says whether they did equal work. Default: the local servers the router is connected to, found from its TCP connections during the load.",
    ),
]
UntilFlag: TypeAlias = Annotated[
    Optional[str],
    typer.Option(
        "--until",
        help="resolved: go on in whole rounds of the scenario until the interpreter share's interval clears the 1% and 30% thresholds and each prediction's share is narrow enough to act on, or --max-time passes; the run then says what held it up. Against a server (--target, --launch) a look between rounds reads py-spy's samples so far (and, with --probe, the probe's bound on the loop's own work).",
    ),
]
MaxTimeFlag: TypeAlias = Annotated[
    Optional[float],
    typer.Option("--max-time", help="With --until resolved: the most seconds of load to spend resolving."),
]
