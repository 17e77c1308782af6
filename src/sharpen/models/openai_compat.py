"""Any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama, hosted APIs).

One ``POST {base_url}/chat/completions`` per :meth:`OpenAIModel.complete`; a
``response_schema`` is sent as ``response_format`` in the form the server speaks (the
``structured`` argument: OpenAI's and vLLM's ``json_schema``, llama-cpp-python's
``json_object`` with a ``schema``, or ``none`` for a server that constrains nothing, whose replies
are then validated after the fact by :func:`~sharpen.models.structured.complete_structured`).
With ``structured: auto`` (the default) the model finds the form: ``json_schema`` first, then
``json_object`` when the server refuses it, then none (the schema goes into the prompt and the
reply is validated) — settled at the first refusal and kept. An explicit form is strict: a
server that refuses it is a ``UserError`` naming the setting to change.

At most ``max_in_flight`` requests are in flight at once (per model instance and event loop,
so across every episode of a run): ``auto`` (the default) asks the server how many it serves
at once (:mod:`sharpen.models.capacity`; unknown → no limit), an integer sets it, ``none``
lifts it. A request waiting for its turn is not yet timed. ``cache_prompt: auto`` sends
llama.cpp's ``cache_prompt: true`` to a server that answered as llama.cpp. ``prefix_hold_s``
keeps a finished request's place for its conversation's next request that long (``auto``:
0.25 s for llama-cpp-python's server, whose one model keeps only the last prompt; else 0). No retries here —
the runner owns retries so that they are counted. Failures map to sharpen's errors:

============================================  ==============================================
what happened                                 raised
============================================  ==============================================
429, 5xx, timeout, refused / reset            ``InfraError(retryable=True, status=...)``
connection, invalid or truncated JSON body,
no ``choices``
401, 403                                      ``UserError`` (check OPENAI_API_KEY / --api-key)
404                                           ``UserError`` naming the base URL
other 4xx                                     ``InfraError(retryable=False)`` with the
                                              server's message
============================================  ==============================================
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, Literal

import httpx

from sharpen.core.errors import InfraError, UserError
from sharpen.core.messages import Message, ToolCall, ToolSpec, Usage
from sharpen.core.registry import register
from sharpen.models.base import Completion, FinishReason
from sharpen.models.capacity import Capacity, EndpointGate, discover
from sharpen.models.structured import ResponseSchema, StructuredOutput, UnsupportedSchema

Structured = Literal["auto", "json_schema", "json_object", "none"]
"""How the server takes a response schema (see the module docstring)."""

_FALLBACK: dict[str, Literal["json_object", "none"]] = {"json_schema": "json_object",
                                                        "json_object": "none"}
"""``structured: auto``: the form tried after the server refused one."""

HOLD_S = 0.25
"""``prefix_hold_s: auto`` for llama-cpp-python's server: longer than an episode's usual
environment step between two calls, shorter than re-evaluating a prompt there."""

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def _server_message(resp: httpx.Response, limit: int = 500) -> str:
    """The error text a server put in its body (OpenAI ``{"error": {"message"}}`` or raw)."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:limit].strip() or resp.reason_phrase
    if isinstance(body, dict):
        err = body.get("error", body)
        message = err.get("message") if isinstance(err, dict) else None
        if isinstance(message, str):
            return message[:limit]
        if isinstance(err, str):
            return err[:limit]
    return json.dumps(body)[:limit]


def _refused_schema(resp: httpx.Response) -> bool:
    """Whether a 4xx answer is about the ``response_format`` sent (not, say, the context)."""
    if resp.status_code == 422:  # a request the server's own schema rejects (llama_cpp.server)
        return True
    text = _server_message(resp).lower()
    if resp.status_code == 500:  # llama-cpp-python 0.3.36 answers its own 422 as a 500
        return "'response_format'" in text
    return resp.status_code == 400 and any(w in text for w in ("response_format", "schema", "json"))


@register("model", "openai")
class OpenAIModel:
    """A ChatModel speaking the OpenAI chat-completions protocol over HTTP.

    Constructor arguments are the serialisable ``args`` of ``{name: openai, args}`` — except
    ``api_key``, which is a runtime secret: pass it as a non-serialised extra
    (``REGISTRY.create("model", ref, api_key=...)``) or let it default to the environment
    variable named by ``api_key_env``. The key is never part of ``args``, ``repr`` or a
    manifest.
    """

    supports_tools: bool

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        *,
        name: str | None = None,
        timeout: float = 120.0,
        logprobs: bool = False,
        tools: bool | Literal["auto"] = True,
        structured: Structured = "auto",
        api_key_env: str = "OPENAI_API_KEY",
        api_key: str | None = None,
        max_in_flight: int | Literal["auto", "none"] = "auto",
        cache_prompt: bool | Literal["auto"] = "auto",
        prefix_hold_s: float | Literal["auto"] = "auto",
    ) -> None:
        """``base_url`` ends in ``/v1``; ``model`` is sent as the request's ``model``;
        ``name`` (default: ``model``) is used for pricing and display; ``timeout`` is in
        seconds for the whole request; ``logprobs`` asks for per-token logprobs; ``tools``
        sends native tool definitions (``"auto"``: also send ``tool_choice: auto``);
        ``False`` means the agent must use the text protocol; ``structured`` is how the
        server takes a response schema (``json_schema``: OpenAI, vLLM; ``json_object``:
        llama-cpp-python's server; ``none``: it cannot, replies are validated instead;
        ``auto``: find out, see the module docstring); ``max_in_flight`` and
        ``cache_prompt``: see the module docstring."""
        if not (max_in_flight in ("auto", "none")
                or (isinstance(max_in_flight, int) and not isinstance(max_in_flight, bool)
                    and max_in_flight >= 1)):
            raise UserError(f"openai model: max_in_flight={max_in_flight!r}",
                            "use auto (ask the server), none (no limit) or a whole number >= 1")
        if cache_prompt not in (True, False, "auto"):
            raise UserError(f"openai model: cache_prompt={cache_prompt!r}",
                            "use true, false or auto")
        if prefix_hold_s != "auto" and not (isinstance(prefix_hold_s, int | float)
                                            and prefix_hold_s >= 0):
            raise UserError(f"openai model: prefix_hold_s={prefix_hold_s!r}",
                            "use auto or a number of seconds >= 0")
        if tools not in (True, False, "auto"):
            raise UserError(f"openai model: tools={tools!r}", "use true, false or auto")
        if structured not in ("auto", "json_schema", "json_object", "none"):
            raise UserError(f"openai model: structured={structured!r}",
                            "use auto, json_schema, json_object or none")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = name or model
        self.timeout = float(timeout)
        self.logprobs = bool(logprobs)
        self.tools = tools
        self.supports_tools = tools is not False
        self.structured: Structured = structured
        self.form: Structured = "json_schema" if structured == "auto" else structured
        """The form a response schema is sent in now (``auto`` settles it at a refusal)."""
        self.api_key_env = api_key_env
        self._api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self.max_in_flight = max_in_flight
        self.cache_prompt = cache_prompt
        self.prefix_hold_s = prefix_hold_s
        self.capacity: Capacity | None = None
        """What the server said about itself (found at the first call that needed it)."""
        self._gate: EndpointGate | None = None
        self._gate_lock: asyncio.Lock | None = None
        self._gate_loop: asyncio.AbstractEventLoop | None = None

    @property
    def structured_output(self) -> StructuredOutput:
        """``server`` unless the form is (or ``auto`` found it to be) ``none``."""
        return "validate" if self.form == "none" else "server"

    def __repr__(self) -> str:
        return f"OpenAIModel(base_url={self.base_url!r}, model={self.model!r}, name={self.name!r})"

    @property
    def args(self) -> dict[str, Any]:
        """The serialisable constructor args (never the API key)."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "name": self.name,
            "timeout": self.timeout,
            "logprobs": self.logprobs,
            "tools": self.tools,
            "structured": self.structured,
            "api_key_env": self.api_key_env,
            "max_in_flight": self.max_in_flight,
            "cache_prompt": self.cache_prompt,
            "prefix_hold_s": self.prefix_hold_s,
        }

    def _get_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            # A client's connections belong to the loop that opened them; one per loop.
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout), headers=headers, trust_env=False
            )
            self._client_loop = loop
        return self._client

    async def gate(self) -> EndpointGate:
        """This event loop's gate (see the module docstring), made at the first call: every
        call of the loop goes through the same one."""
        loop = asyncio.get_running_loop()
        if self._gate is not None and self._gate_loop is loop:
            return self._gate
        if self._gate_lock is None or self._gate_loop is not loop:
            # Loop-bound like the client; the lock makes concurrent first calls ask once.
            self._gate, self._gate_lock, self._gate_loop = None, asyncio.Lock(), loop
        async with self._gate_lock:
            if self._gate is None:
                if self.capacity is None and "auto" in (self.max_in_flight, self.cache_prompt):
                    try:
                        self.capacity = await discover(self._get_client(), self.base_url)
                    except httpx.HTTPError:
                        # Unreachable now: let this call through (it reports the failure)
                        # and ask again at the next one.
                        return EndpointGate(None)
                self._gate = EndpointGate(self._limit(), self._hold_s())
            return self._gate

    def _limit(self) -> int | None:
        if isinstance(self.max_in_flight, int):
            return self.max_in_flight
        if self.max_in_flight == "none" or self.capacity is None:
            return None
        return self.capacity.slots

    def _hold_s(self) -> float:
        if self.prefix_hold_s != "auto":
            return float(self.prefix_hold_s)
        return HOLD_S if self.capacity and self.capacity.server == "llama-cpp-python" else 0.0

    def _sends_cache_prompt(self) -> bool:
        if self.cache_prompt == "auto":
            return self.capacity is not None and self.capacity.server == "llama.cpp"
        return bool(self.cache_prompt)

    def build_request(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        response_schema: ResponseSchema | None = None,
    ) -> dict[str, Any]:
        """The JSON body sent to ``/chat/completions``. ``params`` pass through unchanged
        (temperature, max_tokens, top_p, seed, stop, ...), after ``model`` and ``messages``;
        ``response_schema`` becomes ``response_format`` (see ``structured``)."""
        body: dict[str, Any] = {"model": self.model, "messages": [_wire(m) for m in messages]}
        if tools and self.supports_tools:
            body["tools"] = [t.to_openai() for t in tools]
            if self.tools == "auto":
                body["tool_choice"] = "auto"
        if self.logprobs:
            # top_logprobs >= 1: llama-cpp-python's server returns no logprobs without it.
            body["logprobs"] = True
            body["top_logprobs"] = 1
        if response_schema is not None:
            if self.form == "none":
                raise UnsupportedSchema(
                    f"model {self.name!r} was told its server cannot constrain output "
                    "(structured: none), yet a response schema was passed to it",
                    "call it through sharpen.models.structured.complete_structured, which "
                    "validates replies instead",
                )
            if self.form == "json_schema":
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": response_schema.name, "schema": response_schema.json_schema,
                    "strict": True}}
            else:
                body["response_format"] = {"type": "json_object",
                                           "schema": response_schema.json_schema}
        if self._sends_cache_prompt():
            # llama.cpp keeps the slot's KV cache for the prompt's common prefix (the stable
            # system prompt first): only the new turns are evaluated.
            body["cache_prompt"] = True
        body.update(params or {})
        return body

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        """One chat completion; see the module docstring for the errors raised."""
        url = f"{self.base_url}/chat/completions"
        gate = await self.gate()
        while True:
            if response_schema is not None and self.form == "none" and self.structured == "auto":
                # Nothing constrains on this server: say the schema; the caller validates.
                messages = [*messages, Message(role="user", content=response_schema.instructions())]
                response_schema = None
            sent = self.form
            body = self.build_request(messages, tools, params, response_schema)
            async with gate.slot(_conversation(messages)):
                resp, latency = await self._post(url, body)
            if response_schema is None or not _refused_schema(resp):
                break
            if self.structured != "auto":
                raise UnsupportedSchema(
                    f"{url} refused response_format {body['response_format']['type']!r} "
                    f"(HTTP {resp.status_code}): {_server_message(resp)}",
                    "set the model arg structured to what the server speaks: json_schema "
                    "(OpenAI, vLLM), json_object (llama-cpp-python's server), none (replies "
                    "are validated instead) or auto (found at the first refusal); with "
                    "json_schema, OpenAI also wants every property required and "
                    "additionalProperties: false",
                )
            if self.form == sent:  # calls in flight may have stepped down already
                self.form = _FALLBACK[sent]
        self._raise_for_status(resp, url)
        try:
            data = resp.json()
        except ValueError:
            raise InfraError(
                f"{url}: response body is not valid JSON (truncated?): {resp.text[:200]!r}",
                status=resp.status_code,
            ) from None
        return self.parse_response(data, latency, status=resp.status_code)

    async def _post(self, url: str, body: dict[str, Any]) -> tuple[httpx.Response, float]:
        """The server's answer to ``body`` and the seconds it took; transport failures as
        sharpen's errors (see the module docstring)."""
        start = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout):
                resp = await self._get_client().post(url, json=body)
        except (httpx.TimeoutException, TimeoutError):
            raise InfraError(f"{url}: no answer within {self.timeout:g}s (timeout)") from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise UserError(
                f"bad model base URL {self.base_url!r}: {exc}",
                "use a full URL such as http://127.0.0.1:8000/v1",
            ) from None
        except httpx.TransportError as exc:
            # Refused, reset, DNS, a response cut mid-body (RemoteProtocolError), ...
            what = type(exc).__name__
            raise InfraError(f"{url}: {what}: {exc or 'connection failed'}") from None
        return resp, time.perf_counter() - start

    def _raise_for_status(self, resp: httpx.Response, url: str) -> None:
        status = resp.status_code
        if status < 400:
            return
        msg = _server_message(resp)
        if status in (401, 403):
            raise UserError(
                f"{url} refused the credentials (HTTP {status}): {msg}",
                f"check {self.api_key_env} / --api-key",
            )
        if status == 404:
            raise UserError(
                f"{url} answered 404 Not Found (base URL {self.base_url!r}): {msg}",
                "is --base-url right? it should end in /v1",
            )
        if status == 429 or status >= 500:
            retry_after = resp.headers.get("retry-after")
            hint = f" (Retry-After: {retry_after})" if retry_after else ""
            raise InfraError(f"{url}: HTTP {status}{hint}: {msg}", retryable=True, status=status)
        raise InfraError(f"{url}: HTTP {status}: {msg}", retryable=False, status=status)

    def parse_response(
        self, data: Any, latency_s: float = 0.0, status: int | None = None
    ) -> Completion:
        """A :class:`Completion` from an OpenAI chat-completion JSON object.

        Tool calls whose ``arguments`` are not a JSON object are not dropped: their raw text
        becomes (part of) the message content, so the agent can tell the model what was wrong.
        A body without ``choices`` raises a retryable :class:`InfraError`."""
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise InfraError(
                f"{self.base_url}: response has no choices: {json.dumps(data)[:200]}",
                status=status,
            )
        choice = choices[0]
        raw_msg = choice.get("message") or {}
        content = raw_msg.get("content")
        if content is not None and not isinstance(content, str):
            content = json.dumps(content)
        calls: list[ToolCall] = []
        raw_texts: list[str] = []
        for i, tc in enumerate(raw_msg.get("tool_calls") or []):
            fn = (tc or {}).get("function") or {}
            args_text = fn.get("arguments")
            if isinstance(args_text, dict):
                args: Any = args_text
            else:
                try:
                    args = json.loads(args_text) if args_text not in (None, "") else {}
                except (TypeError, ValueError):
                    args = None
            if not isinstance(args, dict) or not fn.get("name"):
                raw_texts.append(str(args_text if args_text is not None else tc))
                continue
            calls.append(
                ToolCall(id=str(tc.get("id") or f"call_{i}"), name=str(fn["name"]), arguments=args)
            )
        if raw_texts:
            content = "\n".join(([content] if content else []) + raw_texts)
        finish = _FINISH.get(str(choice.get("finish_reason")), "stop")
        if finish == "tool_calls" and not calls:
            finish = "stop"
        raw_usage = data.get("usage") or {}
        usage = Usage(
            input_tokens=int(raw_usage.get("prompt_tokens") or 0),
            output_tokens=int(raw_usage.get("completion_tokens") or 0),
            calls=1,
            cost_usd=None,  # tokens only (none without usage): PricedModel prices them
        )
        return Completion(
            message=Message(role="assistant", content=content, tool_calls=calls),
            finish_reason=finish,
            usage=usage,
            model=str(data.get("model") or self.model),
            logprobs=_logprobs(choice.get("logprobs")) if self.logprobs else None,
            tokens=_tokens(choice.get("logprobs")) if self.logprobs else None,
            latency_s=latency_s,
        )

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _conversation(messages: list[Message]) -> str:
    """A key of the conversation a request continues: its first two messages (the system
    prompt and the task), which every later request of the episode starts with."""
    return json.dumps([m.to_openai() for m in messages[:2]], sort_keys=True)


def _logprobs(raw: Any) -> list[float] | None:
    """Per-token logprobs from the chat format (``content[].logprob``) or the legacy
    completions format (``token_logprobs``); ``None`` when absent."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("content"), list):
        return [float(t["logprob"]) for t in raw["content"] if t.get("logprob") is not None]
    if isinstance(raw.get("token_logprobs"), list):
        return [float(x) for x in raw["token_logprobs"] if x is not None]
    return None


def _tokens(raw: Any) -> list[str] | None:
    """The texts of the tokens :func:`_logprobs` scores (chat format only; else ``None``)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("content"), list):
        return None
    return [str(t.get("token", "")) for t in raw["content"] if t.get("logprob") is not None]


def _wire(message: Message) -> dict[str, Any]:
    """``message`` as sent: an assistant message that only calls tools carries ``content: ""``
    rather than ``null`` — the OpenAI API takes either, llama-cpp-python's server answers 500
    to ``null`` (its request type wants a string), so a native-tools episode could not pass
    its first turn there."""
    out = message.to_openai()
    if out["content"] is None and message.role == "assistant":
        out["content"] = ""
    return out
