"""The serving loop: one engine thread steps scheduler -> kv_alloc -> prepare -> model -> sampler -> detokenizer while clients submit."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TypedDict

import numpy as np

from ..errors import EngineShutdownError, PromptTooLongError, RequestError
from .config import EngineConfig
from .prepare import PythonPrepare
from .sampler import splitmix64
from .sequence import Request, RequestHandle, RequestOutput, StepLog, StepRecord
from .setup_thread import run_on_setup_thread
from .thread_governor import ThreadGovernor, default_governor
from .tokenizer import IncrementalDetokenizer
from .trace import NULL_TRACER, Tracer
from .types import (
    KVAllocator,
    Model,
    NewSequence,
    Prepare,
    Sampler,
    SamplingParams,
    Scheduler,
    StepPlan,
    TextTokenizer,
)

ENGINE_THREAD_NAME = "infer-prof-engine"


class EngineStats(TypedDict):
    """The engine's counters so far (Engine.stats): steps, preemptions, the KV pool's use, requests and tokens."""

    steps: int
    preemptions: int
    blocks_total: int
    blocks_free: int
    requests_finished: int
    tokens_generated: int
    waiting: int
    running: int


def _checked_prepare(scheduler: Scheduler, kv_alloc: KVAllocator, prepare: Prepare | None) -> Prepare:
    """The step's preparer (None: the Python twin), once it and the scheduler agree with kv_alloc's block size."""
    if scheduler.block_size != kv_alloc.block_size:
        raise ValueError(
            f"scheduler block_size {scheduler.block_size} != kv_alloc block_size {kv_alloc.block_size}"
        )
    prepare = PythonPrepare(kv_alloc.block_size) if prepare is None else prepare
    if prepare.block_size != kv_alloc.block_size:
        raise ValueError(
            f"prepare block_size {prepare.block_size} != kv_alloc block_size {kv_alloc.block_size}"
        )
    return prepare


class Engine:
    """Continuous-batching inference over injected components; submit() from any number of threads."""

    def __init__(
        self,
        model: Model,
        tokenizer: TextTokenizer,  # engine.tokenizer.Tokenizer, or a stand-in with its encode/decode
        *,
        scheduler: Scheduler,
        kv_alloc: KVAllocator,
        sampler: Sampler,
        config: EngineConfig,
        prepare: Prepare | None = None,  # None: the Python twin
        tracer: Tracer = NULL_TRACER,
        clock: Callable[[], int] = time.perf_counter_ns,
        on_step: Callable[[StepRecord], None] | None = None,
    ) -> None:
        prepare = _checked_prepare(scheduler, kv_alloc, prepare)
        self.model = model
        self.tokenizer = tokenizer
        self.scheduler = scheduler
        self.kv_alloc = kv_alloc
        self.sampler = sampler
        self.prepare = prepare
        self.config = config
        self.tracer = tracer
        self.clock = clock
        self.on_step = on_step
        self.block_size = kv_alloc.block_size
        self.num_blocks = kv_alloc.num_blocks
        self.max_model_len = config.resolve_max_model_len(model.config.context_length)
        self.vocab_size = model.config.vocab_size
        self._stop_token_ids = frozenset(tokenizer.stop_token_ids)
        # A sampler that reads host memory (the C twin) gets a GPU model's logits copied over in their own
        # "d2h" span, so the copy is measured as such and not as sampling.
        device = getattr(model, "device", None)
        self._copy_logits_to_host = getattr(device, "type", "cpu") != "cpu" and bool(
            getattr(sampler, "needs_host_logits", False)
        )
        # Filling the cache runs parallel ops: off this thread, whose OpenMP pool would slow the engine's.
        run_on_setup_thread(
            lambda: model.allocate_kv_cache(self.num_blocks, self.block_size), "infer-prof-kv-init"
        )

        # Shared with client threads, under _lock.
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._submitted: list[Request] = []
        self._cancelled: list[int] = []
        self._known: dict[int, Request] = {}  # every unfinished request, for cancel()
        self._next_request_id = 0
        self._shutdown = False
        self._abort = False
        self._thread: threading.Thread | None = None
        self._warmed = threading.Event()

        # Engine thread only.
        self._running: dict[int, Request] = {}  # registered with the scheduler and the sampler
        self._finished_ids: list[int] = []  # to report to the scheduler at the next step
        self._num_cached_total = 0  # tokens in the KV cache, as of the last plan
        self.step_records = StepLog()
        self._num_steps = 0
        self._num_preemptions = 0
        self._num_finished = 0
        self._num_generated = 0
        self.threads: ThreadGovernor | None = None  # made on the engine thread, which it governs

    # -- client side ----------------------------------------------------------------------------

    def start(self) -> Engine:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=ENGINE_THREAD_NAME, daemon=True)
                self._thread.start()
        self._warmed.wait()  # the model's warm-up, on the engine thread: no request waits behind it
        return self

    def __enter__(self) -> Engine:  # typing.Self needs Python 3.11
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown(abort=exc_type is not None)

    def submit(
        self,
        prompt: str | Sequence[int],
        params: SamplingParams | None = None,
        *,
        chat: bool = False,
        priority: int = 0,
        on_token: Callable[[str], None] | None = None,
        on_finish: Callable[[RequestOutput], None] | None = None,
    ) -> RequestHandle:
        """Queue a request; raises a RequestError subclass (and serves on) if it can never be served.

        on_token(delta) runs on the engine thread after each sampled token; on_finish(output) runs
        once when the request ends for any reason (done, aborted, failed), on the thread that ended it.
        """
        arrival_ns = self.clock()
        if self._shutdown:
            raise EngineShutdownError("the engine has been shut down: it takes no new requests")
        params = SamplingParams() if params is None else params
        if not isinstance(params, SamplingParams):
            raise RequestError(f"params must be engine.types.SamplingParams, got {type(params).__name__}")
        text, prompt_ids = self._encode(prompt, chat)
        max_tokens = self._check_fits(prompt_ids, params)
        request = Request(
            request_id=-1,
            prompt=text,
            prompt_token_ids=prompt_ids,
            params=params,
            max_tokens=max_tokens,
            priority=priority,
            arrival_ns=arrival_ns,
            on_token=on_token,
            on_finish=on_finish,
        )
        with self.tracer.lock(self._lock, "submit"):
            if self._shutdown:
                raise EngineShutdownError("the engine has been shut down: it takes no new requests")
            request.request_id = self._next_request_id
            self._next_request_id += 1
            if params.seed is None:
                request.params = replace(params, seed=derive_seed(self.config.seed, request.request_id))
            self._known[request.request_id] = request
            self._submitted.append(request)
            self._wakeup.notify()
        return RequestHandle(request, self.cancel)

    def _encode(self, prompt: str | Sequence[int], chat: bool) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            if not prompt:
                raise RequestError("the prompt is empty: give at least one character or token id")
            with self.tracer.span("tokenizer"):
                if chat:
                    ids = list(self.tokenizer.encode_chat(prompt))
                else:
                    ids = list(self.tokenizer.encode(prompt, add_special_tokens=True))
            if not ids:
                raise RequestError(f"the prompt {prompt[:40]!r} encodes to no tokens")
            return prompt, ids
        if chat:
            raise RequestError("chat=True needs the prompt as text (the chat template renders text)")
        ids = list(prompt)
        if not ids:
            raise RequestError("the prompt is empty: give at least one character or token id")
        if not all(isinstance(t, int) and 0 <= t < self.vocab_size for t in ids):
            raise RequestError(f"prompt token ids must be integers in [0, {self.vocab_size})")
        return None, ids

    def _check_fits(self, prompt_ids: list[int], params: SamplingParams) -> int:
        """The request's max_tokens after the context cap; raise if it cannot fit the context or the pool."""
        num_prompt = len(prompt_ids)
        if num_prompt >= self.max_model_len:
            raise PromptTooLongError(
                f"the prompt has {num_prompt} tokens; max_model_len is {self.max_model_len}, which must leave "
                "room for at least one generated token: shorten the prompt"
            )
        max_tokens = min(params.max_tokens, self.max_model_len - num_prompt)
        capacity = self.num_blocks * self.block_size
        if num_prompt + max_tokens > capacity:
            raise PromptTooLongError(
                f"prompt ({num_prompt} tokens) + max_tokens ({max_tokens}) = {num_prompt + max_tokens} tokens "
                f"cannot fit the KV pool even alone ({self.num_blocks} blocks x {self.block_size} = {capacity} "
                "slots): enlarge it with --kv-blocks/--kv-memory, or lower max_tokens"
            )
        return max_tokens

    def cancel(self, request_id: int) -> bool:
        """Abort a request (finish_reason "abort"); False if it is unknown or already finished."""
        with self.tracer.lock(self._lock, "submit"):
            if request_id not in self._known:
                return False
            self._cancelled.append(request_id)
            self._wakeup.notify()
            return True

    def shutdown(self, abort: bool = False, timeout: float | None = None) -> None:
        """Stop taking requests, finish (or abort) those in flight, and join the engine thread.

        After `timeout` seconds the rest is aborted. Every KV block is back in the pool afterwards.
        """
        with self._lock:
            self._shutdown = True
            self._abort = self._abort or abort
            self._wakeup.notify()
            pending = bool(self._known)
        if self._thread is None:
            if not pending:
                return
            self.start()  # requests submitted before start(): serve (or abort) them now
        assert self._thread is not None
        if self._thread is threading.current_thread():
            return  # called from an on_token/on_step callback: the loop ends by itself
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._lock:
                self._abort = True
                self._wakeup.notify()
            self._thread.join()

    @property
    def num_unfinished(self) -> int:
        with self._lock:
            return len(self._known)

    def stats(self) -> EngineStats:
        """Counters so far: steps, preemptions, KV pool use, requests and tokens."""
        return {
            "steps": len(self.step_records),
            "preemptions": self._num_preemptions,
            "blocks_total": self.num_blocks,
            "blocks_free": self.kv_alloc.num_free_blocks,
            "requests_finished": self._num_finished,
            "tokens_generated": self._num_generated,
            "waiting": self.scheduler.num_waiting,
            "running": self.scheduler.num_running,
        }

    # -- engine thread --------------------------------------------------------------------------

    def _warm_up(self) -> None:
        """The model's optional warm_up(max_tokens, max_sampled) on this thread (its kernel caches are per
        thread), before the first step; start() returns when it is done, whether or not it failed."""
        try:
            warm_up = getattr(self.model, "warm_up", None)
            if warm_up is not None:
                warm_up(self.config.max_batched_tokens, self.config.max_batch)
        finally:
            self._warmed.set()

    def _run(self) -> None:
        try:
            self.threads = default_governor()  # before start() returns: the run reads its record
            self._warm_up()
            while True:
                with self.tracer.lock(self._lock, "engine"):
                    # Sleep until there is something to do: no busy loop when idle.
                    while not (
                        self._submitted
                        or self._cancelled
                        or self._running
                        or self._finished_ids
                        or self._shutdown
                    ):
                        self._wakeup.wait()
                    arrivals, self._submitted = self._submitted, []
                    cancelled, self._cancelled = self._cancelled, []
                    shutting_down, abort = self._shutdown, self._abort
                if abort:
                    cancelled = [r.request_id for r in arrivals] + list(self._running)
                if shutting_down and not (arrivals or self._running or self._finished_ids):
                    return
                if self.threads is not None:
                    self.threads.tick()
                try:
                    self._step(arrivals, cancelled)
                except Exception as exc:  # e.g. an on_step hook or sampler.add raised: fail, keep serving
                    self._fail(list(self._running.values()), "engine step failed", exc)
        finally:
            if self.threads is not None:
                self.threads.close()
            # Whatever happened, no client waits forever.
            with self._lock:
                self._shutdown = True
                left = list(self._known.values())
            for request in left:
                self._finish(request, "error", "the engine thread stopped", report=False)

    def _step(self, arrivals: list[Request], cancelled: list[int]) -> None:
        tracer, clock = self.tracer, self.clock
        with tracer.span("step"):
            start_ns = clock()
            # Numbered like the tracer's "step" spans, even if a step ever fails before its record.
            step, self._num_steps = self._num_steps, self._num_steps + 1
            prefill = decode = 0
            with tracer.span("queue"):
                new_sequences = self._admit(arrivals, set(cancelled))
            plan = StepPlan()
            try:
                finished, self._finished_ids = self._finished_ids, []
                with tracer.span("scheduler"):
                    plan = self.scheduler.schedule(new_sequences, finished, self.kv_alloc.num_free_blocks)
                with tracer.span("kv_alloc"):
                    block_tables = self.kv_alloc.step(
                        plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids
                    )
                prefill, decode = self._account_cache(plan)
                if not len(plan.seq_ids) and not len(plan.frees) and plan.num_waiting + plan.num_running:
                    raise RuntimeError("the scheduler planned nothing although requests are waiting")
            except Exception as exc:  # the scheduler or allocator state cannot be trusted: fail everything
                self._fail(list(self._running.values()), "scheduling failed", exc)
                plan = StepPlan()
            if len(plan.seq_ids):
                try:
                    self._run_batch(plan, block_tables)
                except Exception as exc:  # a model/sampler error fails its batch only
                    batch = [self._running[s] for s in plan.seq_ids.tolist() if s in self._running]
                    self._fail(batch, "the step failed", exc)
            self._record(step, plan, start_ns, prefill, decode)

    def _admit(self, arrivals: list[Request], cancelled: set[int]) -> list[NewSequence]:
        """Register arrivals with the sampler; abort cancelled requests (cancels count as finished now)."""
        new_sequences = []
        for request in arrivals:
            if request.request_id in cancelled:
                self._finish(request, "abort", None, report=False)  # the scheduler never saw it
                continue
            request.token_ids = list(request.prompt_token_ids)
            request.detokenizer = IncrementalDetokenizer(self.tokenizer)
            try:
                self.sampler.add(request.request_id, request.params, request.prompt_token_ids)
            except Exception as exc:  # e.g. a native sampler refusing it: fail this one only
                self._fail([request], "the sampler refused the request", exc, report=False)
                continue
            try:
                self.prepare.add(request.request_id, request.prompt_token_ids)
            except Exception as exc:  # refused prompt ids: fail this one only
                self.sampler.remove(request.request_id)
                self._fail([request], "input preparation refused the request", exc, report=False)
                continue
            self._running[request.request_id] = request
            new_sequences.append(
                NewSequence(
                    request.request_id, request.num_prompt_tokens, request.max_tokens, request.priority
                )
            )
        for request_id in cancelled:
            running = self._running.get(request_id)
            if running is not None and running.output is None:
                self._finish(running, "abort", None)
        return new_sequences

    def _account_cache(self, plan: StepPlan) -> tuple[int, int]:
        """Count preemptions, stamp first-scheduled times and keep the cached-token total; return the
        step's prefill tokens and decode tokens (a decode: one token past the prompt)."""
        self._num_cached_total = plan.num_cached_tokens
        if len(plan.preempted):
            self._num_preemptions += len(plan.preempted)
            for seq_id in plan.preempted.tolist():
                if seq_id in self._running:
                    self._running[seq_id].num_preemptions += 1
        if plan.first_admitted < len(plan.seq_ids):  # only admissions can be a request's first schedule
            now = None
            for seq_id in plan.seq_ids[plan.first_admitted :].tolist():
                request = self._running[seq_id]
                if request.scheduled_ns is None:
                    now = self.clock() if now is None else now
                    request.scheduled_ns = now
        return plan.prefill_tokens, plan.decode_tokens

    def _run_batch(self, plan: StepPlan, block_tables: np.ndarray) -> None:
        with self.tracer.span("prepare"):
            model_input = self.prepare.prepare(plan, block_tables)
        with self.tracer.span("model"):
            logits = self.model.forward(model_input)
        sampled_ids = plan.seq_ids[plan.samples].tolist()
        if not sampled_ids:
            return
        if self._copy_logits_to_host:
            with self.tracer.span("d2h"):
                logits = logits.cpu()
        with self.tracer.span("sampler"):
            tokens = self.sampler.sample(logits, sampled_ids)
        self.prepare.append_sampled(tokens)  # buffered: the next prepare() appends them
        now = self.clock()
        self._num_generated += len(sampled_ids)
        sampled = [self._running[seq_id] for seq_id in sampled_ids]
        with self.tracer.span("detokenizer"):
            updates = [self._append_token(request, token, now) for request, token in zip(sampled, tokens)]
        for request, (delta, reason) in zip(sampled, updates):
            self._deliver(request, delta)
            if reason is not None:
                self._finish(request, reason, None)

    def _append_token(self, request: Request, token: int, now: int) -> tuple[str, str | None]:
        """Add one sampled token; return the text to stream now and the finish reason, if it finished."""
        request.token_ids.append(token)
        request.token_ns.append(now)
        params = request.params
        reason = None
        if token in self._stop_token_ids and not params.ignore_eos:
            reason = "stop"
        elif len(request.token_ids) - request.num_prompt_tokens >= request.max_tokens:
            reason = "length"  # max_tokens, or max_model_len (max_tokens is capped to it)
        assert request.detokenizer is not None
        request.text += request.detokenizer.push([token])
        if reason is not None:
            request.text += request.detokenizer.flush()
        if params.stop:
            cut = _find_stop(request.text, params.stop, request.stop_checked)
            if cut is not None:
                request.text = request.text[:cut]
                reason = "stop"
            elif reason is None:
                # A stop string may still be completed by the next tokens: hold its possible start back.
                request.stop_checked = max(
                    request.stop_checked, len(request.text) - max(map(len, params.stop)) + 1
                )
        ready = len(request.text) if reason is not None or not params.stop else request.stop_checked
        delta = request.text[request.num_emitted : ready]
        request.num_emitted = max(request.num_emitted, ready)
        return delta, reason

    def _deliver(self, request: Request, delta: str) -> None:
        if delta:
            request.publish(delta)
        if request.on_token is not None:
            try:
                request.on_token(delta)
            except Exception as exc:  # a client's bug fails its own request, not the engine
                self._fail([request], "the on_token callback raised", exc)

    def _fail(self, requests: list[Request], what: str, exc: BaseException, report: bool = True) -> None:
        message = f"{what}: {type(exc).__name__}: {exc}"
        for request in requests:
            if request.output is None:
                self._finish(request, "error", message, report)

    def _finish(self, request: Request, reason: str, error: str | None, report: bool = True) -> None:
        """Close a request: result out, stream closed; with `report`, the scheduler hears of it next step."""
        if request.output is not None:
            return
        if request.num_emitted < len(request.text):
            request.publish(request.text[request.num_emitted :])
            request.num_emitted = len(request.text)
        output = request.finish(reason, error, self.clock())
        if report and self._running.pop(request.request_id, None) is not None:
            self._finished_ids.append(request.request_id)
            self.sampler.remove(request.request_id)
            self.prepare.remove(request.request_id)
        with self._lock:
            self._known.pop(request.request_id, None)
        self._num_finished += 1
        if request.on_finish is not None:
            try:
                request.on_finish(output)
            except Exception:  # the request is over: a client's bug cannot fail it any more
                pass

    def _record(self, step: int, plan: StepPlan, start_ns: int, prefill: int, decode: int) -> None:
        used = self.num_blocks - self.kv_alloc.num_free_blocks
        record = StepRecord(
            step=step,
            start_ns=start_ns,
            end_ns=self.clock(),
            batch_size=len(plan.seq_ids),
            prefill_tokens=prefill,
            decode_tokens=decode,
            blocks_used=used,
            blocks_free=self.num_blocks - used,
            kv_utilization=used / self.num_blocks,
            fragmentation_slots=used * self.block_size - self._num_cached_total,
            preemptions=len(plan.preempted),
            waiting=self.scheduler.num_waiting,
            running=self.scheduler.num_running,
        )
        self.step_records.append(record)
        self.tracer.counter("batch_size", record.batch_size)
        self.tracer.counter("kv_utilization", record.kv_utilization)
        if self.on_step is not None:
            self.on_step(record)


def derive_seed(engine_seed: int, request_id: int) -> int:
    """A request's sampling seed when it gives none: a SplitMix64 mix of the engine seed and its id."""
    return splitmix64(engine_seed, request_id)


def _find_stop(text: str, stops: tuple[str, ...], checked: int) -> int | None:
    """Where the earliest stop string starts in `text`, searching from `checked` on."""
    found = [i for i in (text.find(stop, checked) for stop in stops) if i >= 0]
    return min(found) if found else None


__all__ = ["ENGINE_THREAD_NAME", "Engine", "RequestHandle", "RequestOutput", "StepRecord", "derive_seed"]
