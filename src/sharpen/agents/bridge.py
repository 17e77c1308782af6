"""The bridge: an OpenAI-compatible proxy in front of one episode's ChatModel and environment.

Routes (served by :mod:`sharpen.agents.bridge_http` on loopback):

- ``GET /v1/models`` — the run's model, as one entry.
- ``POST /v1/chat/completions`` — one call of the run's model. The request's messages
  (string or text-part content; ``system``/``developer``, ``user``, ``assistant`` with
  ``tool_calls``, ``tool``), ``tools`` and sampling params (``temperature``, ``top_p``,
  ``max_tokens``/``max_completion_tokens``, ``seed``, ``stop``; over the spec's params and the
  episode's seed) go to ``ChatModel.complete``; the reply comes back as a chat completion with
  ``usage`` — as one SSE chunk plus ``[DONE]`` when ``stream`` is set. Each call is one
  :class:`~sharpen.core.trajectory.Step`: the reply, its usage and cost, its model time.
  A model without native tools still gets tool calls: the tools are described in the system
  message by the text protocol (:mod:`sharpen.agents.text_protocol`), earlier calls and
  results are written back as text, and a reply that parses as an action is returned as an
  OpenAI tool call (finish reason ``tool_calls``); ``Step.info["tools"]`` says which way
  (``native`` or ``text``).
- ``POST /sharpen/tool`` — ``{"name", "arguments", "tool_call_id"?}``: one environment action
  (``env.step``), answered ``{"observation", "reward", "terminated", "truncated",
  "invalid"}``. It is recorded on the step whose reply made that call (matched by
  ``tool_call_id``, else the latest step without an action), or on a step of its own.

Faults: an :class:`~sharpen.core.errors.InfraError` of the model (after the runner's retries),
an error inside the bridge, or a :class:`~sharpen.core.errors.UserError` (a cassette miss, a
bad model config) is kept in :attr:`Bridge.fault`, answered with an error status, and stops
the episode (:attr:`Bridge.stopped`). So does a limit of the spec (model calls up to
``max_steps``, tokens, dollars): the step that reached it is marked truncated with
``info["limit"]`` and later calls are refused.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from sharpen.agents.acting import apply_action
from sharpen.agents.bridge_http import Request, Response
from sharpen.agents.text_protocol import ParseError, parse_text_action, protocol_instructions
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import InfraError, UserError
from sharpen.core.messages import Message, Role, ToolCall, ToolSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel, Completion, FinishReason, call_info, call_logprobs

PARAMS = ("temperature", "top_p", "max_tokens", "seed", "stop")
"""Sampling params taken from a request (``max_completion_tokens`` is read as ``max_tokens``)."""


ROLES: dict[Any, Role] = {"system": "system", "developer": "system", "user": "user",
                          "assistant": "assistant", "tool": "tool"}
"""OpenAI roles and the sharpen role each is read as."""


TOOLS_INFO = "tools"
"""``Step.info`` key of a call that offered tools: how they reached the model, ``native``
(as tools) or ``text`` (described by the text protocol, the reply parsed back)."""


class BadRequest(ValueError):
    """A request the bridge cannot read (answered 400; the agent's mistake, not a fault)."""


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise BadRequest(f"message content must be a string or a list of parts, not {content!r}")


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        raise BadRequest(f"tool call arguments are not JSON: {raw!r}") from None
    if not isinstance(value, dict):
        raise BadRequest(f"tool call arguments must be a JSON object, not {raw!r}")
    return value


def to_messages(raw: Any) -> list[Message]:
    """OpenAI chat messages as sharpen :class:`Message` objects (``BadRequest`` if not)."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages must be a non-empty list")
    out = []
    for m in raw:
        role = ROLES.get(m.get("role"))
        if role is None:
            raise BadRequest(f"unknown message role {m.get('role')!r}")
        calls = [ToolCall(id=c.get("id") or uuid.uuid4().hex, name=c["function"]["name"],
                          arguments=_arguments(c["function"].get("arguments")))
                 for c in m.get("tool_calls") or []]
        out.append(Message(role=role, content=_text(m.get("content")), tool_calls=calls,
                           tool_call_id=m.get("tool_call_id")))
    return out


def as_text_protocol(messages: list[Message], tools: list[ToolSpec]) -> list[Message]:
    """``messages`` for a model without native tools: the tools described after the system
    message (or in one of its own), tool calls written as the text protocol's JSON, tool
    results as user messages."""
    how = protocol_instructions(tools)
    out = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            calls = "\n".join(json.dumps({"tool": c.name, "arguments": c.arguments})
                              for c in m.tool_calls)
            out.append(Message(role="assistant", content=calls))
        elif m.role == "tool":
            out.append(Message(role="user", content=m.content))
        else:
            out.append(m)
    if out[0].role == "system":
        out[0] = Message(role="system", content=f"{out[0].content or ''}\n\n{how}".strip())
    else:
        out.insert(0, Message(role="system", content=how))
    return out


def _error(status: int, message: str, kind: str) -> Response:
    return Response.of_json({"error": {"message": message, "type": kind}}, status)


class Bridge:
    """The proxy of one episode (see the module doc). :meth:`handle` serves requests;
    :attr:`fault` and :attr:`limit` say how it ended."""

    def __init__(self, env: Environment, model: ChatModel, spec: AgentSpec,
                 trajectory: Trajectory) -> None:
        self.env, self.model, self.spec, self.trajectory = env, model, spec, trajectory
        self.tools = {t.name: t for t in env.tools}
        self.fault: Exception | None = None
        """The first fault: an InfraError (the model, or the bridge itself: the episode is
        ``infra``), a UserError (it stops the run) or the environment's own exception (``env``)."""
        self.limit: str | None = None
        """The spec's limit that was reached, if one was."""
        self.stopped = asyncio.Event()
        """Set on a fault or a limit: the agent program is stopped."""
        self._env_lock = asyncio.Lock()  # one environment step at a time
        self._calls = 0

    @property
    def actions(self) -> int:
        """Environment actions taken so far."""
        return sum(1 for s in self.trajectory.steps if s.action is not None)

    async def handle(self, request: Request) -> Response:
        """Answer one HTTP request."""
        try:
            if request.path.rstrip("/") in ("/v1/models", "/models"):
                return Response.of_json({"object": "list", "data": [
                    {"id": self.model.name, "object": "model", "created": 0,
                     "owned_by": "sharpen"}]})
            if request.method != "POST":
                return _error(405, f"{request.method} {request.path} is not served", "invalid_request")
            if request.path.rstrip("/") in ("/v1/chat/completions", "/chat/completions"):
                return await self._chat(request.json())
            if request.path.rstrip("/") == "/sharpen/tool":
                return await self._tool(request.json())
            return _error(404, f"no route {request.path}", "invalid_request")
        except (BadRequest, ValueError, KeyError, TypeError, AttributeError) as exc:
            return _error(400, f"bad request: {exc!r}", "invalid_request")
        except (InfraError, UserError) as exc:
            self._stop(exc)
            return _error(502 if isinstance(exc, InfraError) else 400, str(exc), "sharpen_fault")
        except Exception as exc:  # noqa: BLE001 — a bridge bug is infra, never the agent's
            self._stop(InfraError(f"agent bridge fault: {exc!r}", retryable=False))
            return _error(500, f"agent bridge fault: {exc!r}", "sharpen_fault")

    def _stop(self, fault: Exception) -> None:
        if self.fault is None:
            self.fault = fault
        self.stopped.set()

    def _params(self, body: dict[str, Any]) -> dict[str, Any]:
        params = {**self.spec.params, "seed": self.trajectory.seed}
        if body.get("max_completion_tokens") is not None:
            params["max_tokens"] = body["max_completion_tokens"]
        params.update({k: body[k] for k in PARAMS if body.get(k) is not None})
        return params

    def _request_tools(self, body: dict[str, Any]) -> list[ToolSpec]:
        """The request's tools; the environment's own spec where the name is one of its
        tools (it carries the text protocol's hints)."""
        out = []
        for t in body.get("tools") or []:
            f = t["function"]
            out.append(self.tools.get(f["name"]) or ToolSpec(
                name=f["name"], description=f.get("description", ""),
                parameters=f.get("parameters") or {"type": "object", "properties": {}}))
        return out

    async def _chat(self, body: dict[str, Any]) -> Response:
        if self.stopped.is_set():
            return _error(429, f"the episode is over: {self.limit or self.fault}", "sharpen_limit")
        messages = to_messages(body.get("messages"))
        tools = self._request_tools(body)
        native = self.model.supports_tools
        sent = messages if native or not tools else as_text_protocol(messages, tools)
        self._calls += 1
        completion = await self.model.complete(sent, tools if native and tools else None,
                                               self._params(body))
        reply = completion.message
        finish = completion.finish_reason
        if tools and not native and not reply.tool_calls:
            reply, finish = self._as_tool_call(reply, tools, completion,
                                               f"call_{len(self.trajectory.steps)}")
        step = self._record(messages, reply, completion)
        if tools:
            step.info[TOOLS_INFO] = "native" if native else "text"
        payload = self._completion_json(reply, finish, completion)
        if body.get("stream"):
            return self._stream(payload, bool((body.get("stream_options") or {}).get("include_usage")))
        return Response.of_json(payload)

    @staticmethod
    def _as_tool_call(reply: Message, tools: list[ToolSpec], completion: Completion,
                      call_id: str) -> tuple[Message, FinishReason]:
        """``reply`` read by the text protocol: as a tool call with ``call_id`` (stable, so
        that a replayed conversation is the recorded one), or as it is."""
        try:
            action = parse_text_action(reply.content or "", tools,
                                       cut_off=completion.finish_reason == "length")
        except ParseError:
            return reply, completion.finish_reason  # plain text: the agent's answer
        call = ToolCall(id=call_id, name=action.tool,
                        arguments=action.arguments)
        return Message(role="assistant", content=None, tool_calls=[call]), "tool_calls"

    def _record(self, messages: list[Message], reply: Message, completion: Completion) -> Step:
        traj = self.trajectory
        step = Step(index=len(traj.steps), messages=[reply], usage=completion.usage,
                    model_seconds=completion.latency_s, info=call_info(completion),
                    # the logprobs are the model's text's: not of a reply rewritten as a call
                    logprobs=call_logprobs(completion) if reply is completion.message else None)
        traj.steps.append(step)
        traj.usage = traj.usage + completion.usage
        traj.messages = [*messages, reply]  # the agent's own view of the conversation
        reason = self._limit_hit()
        if reason:
            step.truncated = True
            step.info["limit"] = reason
            self.limit = reason
            self.stopped.set()
        return step

    def _limit_hit(self) -> str | None:
        limits, usage = self.spec.limits, self.trajectory.usage
        if self._calls >= limits.max_steps:
            return f"step limit ({limits.max_steps} model calls)"
        if usage.total_tokens >= limits.max_tokens:
            return f"token limit ({limits.max_tokens})"
        cost = usage.cost_usd
        if limits.max_cost_usd is not None and cost is not None and cost >= limits.max_cost_usd:
            return f"cost limit (${limits.max_cost_usd:g})"
        return None

    def _completion_json(self, reply: Message, finish: FinishReason,
                         completion: Completion) -> dict[str, Any]:
        message = reply.to_openai()
        u = completion.usage
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": completion.model or self.model.name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}],
            "usage": {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                      "total_tokens": u.total_tokens},
        }

    @staticmethod
    def _stream(payload: dict[str, Any], include_usage: bool) -> Response:
        """``payload`` as server-sent events: one chunk with the whole message, one with
        the finish reason (and usage when asked for), then ``[DONE]``."""
        choice = payload["choices"][0]
        delta: dict[str, Any] = {"role": "assistant", "content": choice["message"]["content"]}
        if choice["message"].get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **c}
                                   for i, c in enumerate(choice["message"]["tool_calls"])]
        base = {k: payload[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        chunks = [base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  base | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}]
        if include_usage:
            chunks.append(base | {"choices": [], "usage": payload["usage"]})
        text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return Response(200, text.encode(), "text/event-stream", {"Cache-Control": "no-cache"})

    async def _tool(self, body: dict[str, Any]) -> Response:
        if self.stopped.is_set():
            return _error(429, f"the episode is over: {self.limit or self.fault}", "sharpen_limit")
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise BadRequest('a tool call is {"name": TOOL, "arguments": {...}}')
        action = Action(tool=body["name"], arguments=_arguments(body.get("arguments")))
        async with self._env_lock:
            step = self._step_for(body.get("tool_call_id"))
            ours = dict(step.info)  # apply_action sets the env's info; keep the bridge's too
            try:
                observation = await apply_action(self.env, self.trajectory, step, action)
            except Exception as exc:  # noqa: BLE001 — the environment's fault, stored as env
                self._stop(exc)
                return _error(500, f"environment fault: {exc!r}", "sharpen_fault")
            step.info.update(ours)
            call_id = body.get("tool_call_id")
            answer = (Message(role="tool", tool_call_id=call_id, content=observation)
                      if call_id else Message(role="user", content=observation))
            step.messages.append(answer)
            # Until the next model call brings the program's own view, the conversation ends
            # with this answer.
            self.trajectory.messages.append(answer)
        return Response.of_json({"observation": observation, "reward": step.reward,
                                 "terminated": step.terminated, "truncated": step.truncated,
                                 "invalid": step.invalid_action is not None})

    def _step_for(self, call_id: str | None) -> Step:
        """The step an action is recorded on (see the module doc)."""
        steps = self.trajectory.steps
        free = [s for s in steps if s.action is None and s.invalid_action is None]
        if call_id:
            match = [s for s in free if any(c.id == call_id for m in s.messages for c in m.tool_calls)]
            if match:
                return match[-1]
        elif free and free[-1] is steps[-1]:
            return steps[-1]
        step = Step(index=len(steps), messages=[])
        steps.append(step)
        return step
