"""The ``router`` model: each call goes to one of several models by the predicted difficulty
of its task, and to the next one when that one fails.

``{name: router, args: {routes: [REF, ...], classifier: router.json}}`` — ``routes`` are
model refs, cheapest first (default: the routes the classifier was fitted on); ``classifier``
is a file written by ``sharpen router fit`` (:mod:`sharpen.models.routing`). A call's task
text is its first user message (what the environment said at reset, so every call of an
episode goes to the same route); the classifier picks the cheapest route likely enough for
it (``threshold``). Without a classifier every call starts at the first route.

Fallback: when the chosen route raises an :class:`~sharpen.core.errors.InfraError` (a dead
endpoint, a 5xx, a timeout) the call goes to the next route, and so on up the list; when the
last one fails too its error propagates, and the runner retries or records ``infra`` as for
any model. A :class:`~sharpen.core.errors.UserError` (a bad config) is never escalated.

Each completion says which route served it (:attr:`Completion.route`: the runner prices the
call as that model, and the step's ``info["route"]`` records it) and, in
``info["route_failed"]``, the routes that failed before it with their errors.
"""

from __future__ import annotations

from typing import Any

from sharpen.core.errors import InfraError, UserError
from sharpen.core.messages import Message, ToolSpec
from sharpen.core.registry import REGISTRY, PluginRef, register
from sharpen.models.base import MODEL, ChatModel, Completion, complete_with
from sharpen.models.routing import RouterClassifier
from sharpen.models.structured import ResponseSchema, StructuredOutput, structured_output

ROUTE_FAILED = "route_failed"
"""``Step.info`` key: the routes that failed before one served the call, with the errors."""


def task_text(messages: list[Message]) -> str:
    """The text a call is routed by: its first user message (the task), else all its text."""
    for m in messages:
        if m.role == "user" and m.content:
            return m.content
    return "\n".join(m.content or "" for m in messages)


@register("model", "router")
class RouterModel:
    """Routes each call to one of ``routes`` by predicted difficulty, falling back up the
    list on infra failures (see the module docstring).

    Args: ``routes`` (model refs ``{name, args}``, cheapest first; default: the
    classifier's), ``classifier`` (path of a ``sharpen router fit`` file; none: every call
    starts at the first route), ``threshold`` (a call goes to the cheapest route whose
    predicted chance of being enough reaches it; default 0.5), ``name`` (default
    ``router``)."""

    def __init__(
        self,
        routes: list[dict[str, Any]] | None = None,
        classifier: str | None = None,
        threshold: float = 0.5,
        name: str = "router",
    ) -> None:
        self.classifier = RouterClassifier.load(classifier) if classifier else None
        if routes is None:
            if self.classifier is None:
                raise UserError("router model: no routes", "give routes: [{name, args}, ...] "
                                "(cheapest first) or a classifier fitted on runs of them")
            refs = list(self.classifier.routes)
        else:
            refs = [PluginRef.model_validate(r) for r in routes]
        if not refs:
            raise UserError("router model: routes is empty", "give at least one model ref")
        if self.classifier is not None and len(self.classifier.routes) != len(refs):
            raise UserError(
                f"router model: {len(refs)} routes, but the classifier {classifier} was fitted "
                f"on {len(self.classifier.routes)}",
                "give as many routes as it was fitted on, in the same order (cheapest first)")
        if not 0.0 < threshold <= 1.0:
            raise UserError(f"router model: threshold={threshold!r}", "use a number in (0, 1]")
        self.threshold = float(threshold)
        self.name = name
        self.routes: list[ChatModel] = [REGISTRY.create(MODEL, ref) for ref in refs]
        self.supports_tools = all(r.supports_tools for r in self.routes)
        forms = {structured_output(r) for r in self.routes}
        # One form for all, or none: a schema must mean the same to whichever route serves.
        self.structured_output: StructuredOutput = forms.pop() if len(forms) == 1 else "validate"

    def pick(self, messages: list[Message]) -> int:
        """The index of the route a call with ``messages`` goes to first."""
        if self.classifier is None:
            return 0
        return self.classifier.route(task_text(messages), self.threshold)

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        """The reply of the picked route, or of the first after it that does not fail with an
        :class:`InfraError`; the last route's error when every one fails."""
        failed: list[dict[str, str]] = []
        first = self.pick(messages)
        for index in range(first, len(self.routes)):
            route = self.routes[index]
            try:
                completion = await complete_with(route, messages, tools, params, response_schema)
            except InfraError as exc:
                failed.append({"route": route.name, "error": str(exc)[:300]})
                if index == len(self.routes) - 1:
                    raise
                continue
            completion.route = route.name
            if failed:
                completion.info = {**completion.info, ROUTE_FAILED: failed}
            return completion
        raise AssertionError("unreachable: the last route returns or raises")

    async def aclose(self) -> None:
        """Close every route."""
        for route in self.routes:
            await route.aclose()
