"""An endpoint's capacity — how many requests it serves at once — and the gate that keeps at
most that many in flight.

A server with fewer slots than requests in flight queues the rest, and with every queued
conversation evicting the previous one's prompt from the server's cache it thrashes. The
OpenAI-compatible model therefore finds the capacity once (:func:`discover`) and sends through
an :class:`EndpointGate`, one per model instance and event loop — the runner shares one model
instance across every episode of a run, so the gate is shared too, and nothing is global.

What :func:`discover` asks (``root`` is the base URL without its ``/v1``):

==============================  ====================================================
answer                          capacity
==============================  ====================================================
``GET root/props`` with         ``total_slots`` (llama.cpp's ``llama-server``; it also
``total_slots``                 takes ``cache_prompt``)
``GET root/slots``, a list      its length (llama.cpp with ``/props`` turned off)
``GET root/openapi.json``       1 — llama-cpp-python's ``llama_cpp.server`` holds one
titled "llama.cpp Python API"   lock around its model: one request at a time
anything else (vLLM, hosted)    unknown: no limit unless ``max_in_flight`` is given
==============================  ====================================================
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import httpx

from sharpen.core.episode_end import at_episode_end

Server = Literal["llama.cpp", "llama-cpp-python", "unknown"]
"""What kind of server answered the capacity probes."""

PROBE_TIMEOUT_S = 5.0
"""How long one capacity probe may take (a server that does not answer is a server whose
capacity is unknown; the chat request then reports the real failure)."""

LLAMA_CPP_PYTHON_TITLE = "llama.cpp Python API"


@dataclass(frozen=True)
class Capacity:
    """What the endpoint said about itself."""

    server: Server
    slots: int | None
    """Requests it serves at once; ``None``: it did not say."""


async def _get_json(client: httpx.AsyncClient, url: str) -> Any:
    """The JSON body of a 200 answer to ``GET url``; ``None`` for any other answer.
    Transport failures propagate (the caller decides what an unreachable server means)."""
    resp = await client.get(url, timeout=PROBE_TIMEOUT_S)
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


async def discover(client: httpx.AsyncClient, base_url: str) -> Capacity:
    """The capacity of the server at ``base_url`` (see the module docstring). Raises
    ``httpx.TransportError`` when the server cannot be reached at all."""
    root = base_url.rstrip("/").removesuffix("/v1")
    props = await _get_json(client, f"{root}/props")
    if isinstance(props, dict) and isinstance(props.get("total_slots"), int):
        return Capacity("llama.cpp", max(1, props["total_slots"]))
    slots = await _get_json(client, f"{root}/slots")
    if isinstance(slots, list) and slots and all(isinstance(s, dict) for s in slots):
        return Capacity("llama.cpp", len(slots))
    api = await _get_json(client, f"{root}/openapi.json")
    info = api.get("info") if isinstance(api, dict) else None
    title = info.get("title") if isinstance(info, dict) else None
    if isinstance(title, str) and LLAMA_CPP_PYTHON_TITLE in title:
        return Capacity("llama-cpp-python", 1)
    return Capacity("unknown", None)


TRIAL_HOLDS = 8
"""Holds an :class:`EndpointGate` makes before it asks whether they are taken up."""

GAPS_KEPT = 32
"""How many of the latest gaps (a conversation's request done → its next one asking) a gate
sizes its holds from."""

GAPS_BEFORE_FITTING = 4
"""Gaps seen before a gate holds for less than its ``hold_s``."""

HOLD_MARGIN = 3.0
HOLD_FLOOR_S = 0.05
"""A fitted hold: ``HOLD_MARGIN`` × the 90th percentile of the recent gaps (one slow step
in ten loses its place rather than every episode's end holding one the longest), at least
``HOLD_FLOOR_S`` (timer jitter), at most ``hold_s``."""

CONVERSATIONS_KEPT = 1024
"""Conversations whose last release time a gate remembers (the oldest are forgotten)."""


class EndpointGate:
    """Lets at most ``limit`` requests through at once (``None``: any number), first come
    first served, and counts them. Belongs to one event loop.

    With ``hold_s > 0`` a finished request's place is kept for the next request of the same
    conversation (``conversation``: a key of its stable prefix) for up to ``hold_s`` seconds
    while its episode does environment work: a one-slot server that keeps only its last
    prompt then extends that prompt instead of evaluating another conversation's from the
    start. Others get the place when the hold runs out. Holds that are not taken up cost
    their time, so after ``TRIAL_HOLDS`` of them the gate holds only while at least half of
    its holds were taken up (one-call conversations, such as a judge's, soon stop it). And
    since the hold after an episode's last call is never taken up, a hold lasts only about as
    long as conversations are seen to take to come back (:meth:`hold_for`): where environment
    steps take milliseconds, that hold ends after ``HOLD_FLOOR_S``, not ``hold_s``. Inside an
    episode the runner plays (:func:`sharpen.core.episode_end.playing`) it does not wait even
    that long: the place goes on as soon as the agent is done (:meth:`end`)."""

    def __init__(self, limit: int | None, hold_s: float = 0.0) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.limit = limit
        self.hold_s = hold_s if limit is not None else 0.0
        self._free = limit
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._held: dict[str, asyncio.TimerHandle] = {}
        self._released_at: OrderedDict[str, float] = OrderedDict()
        self._gaps: deque[float] = deque(maxlen=GAPS_KEPT)
        self.in_flight = 0
        """Requests inside the gate now."""
        self.peak = 0
        """The most that were inside the gate at once."""
        self.waited = 0
        """Requests that found the gate full and waited."""
        self.resumed = 0
        """Requests that took the place their conversation's previous request held."""
        self.holds = 0
        """Places held for a conversation's next request."""
        self.ended = 0
        """Of those, places given back when the conversation's episode ended (never to be
        taken up, and costing nothing, they do not count against holding)."""

    @asynccontextmanager
    async def slot(self, conversation: str | None = None) -> AsyncIterator[None]:
        """Hold one of the gate's places for the duration of the ``async with`` block."""
        await self._acquire(conversation)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1
            self._release(conversation)

    def hold_for(self) -> float:
        """How long a place is held now: ``hold_s`` until ``GAPS_BEFORE_FITTING`` gaps were
        seen, then ``HOLD_MARGIN`` × the 90th percentile of the latest ``GAPS_KEPT`` (at
        least ``HOLD_FLOOR_S``, at most ``hold_s``)."""
        if len(self._gaps) < GAPS_BEFORE_FITTING:
            return self.hold_s
        gaps = sorted(self._gaps)
        p90 = gaps[min(len(gaps) - 1, int(0.9 * len(gaps)))]
        return min(self.hold_s, max(HOLD_FLOOR_S, HOLD_MARGIN * p90))

    async def _acquire(self, conversation: str | None) -> None:
        if self._free is None:
            return
        if conversation is not None and self.hold_s > 0:
            # Every return counts, held or not: a hold that ran out before the conversation
            # came back must still lengthen the next ones.
            released = self._released_at.pop(conversation, None)
            if released is not None:
                self._gaps.append(asyncio.get_running_loop().time() - released)
        held = self._held.pop(conversation, None) if conversation is not None else None
        if held is not None:
            held.cancel()
            self.resumed += 1
            return
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        self.waited += 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._give()  # granted as it was cancelled: pass the place on
            else:
                self._waiting.remove(fut)
            raise

    def _release(self, conversation: str | None) -> None:
        if self._free is None:
            return
        loop = asyncio.get_running_loop()
        if self.hold_s > 0 and conversation is not None:
            self._released_at[conversation] = loop.time()
            self._released_at.move_to_end(conversation)
            if len(self._released_at) > CONVERSATIONS_KEPT:
                self._released_at.popitem(last=False)
            at_episode_end((self, conversation), partial(self.end, conversation))
        counted = self.holds - self.ended
        if (self.hold_s > 0 and conversation is not None and conversation not in self._held
                and (counted < TRIAL_HOLDS or 2 * self.resumed >= counted)):
            self.holds += 1
            self._held[conversation] = loop.call_later(self.hold_for(), self._expire,
                                                       conversation)
            return
        self._give()

    def end(self, conversation: str) -> None:
        """``conversation`` will not come back (its episode's agent is done): a place held for
        it goes on now, and the time until a conversation of the same key is seen again (the
        same task's next epoch) is not taken for a return. Called on the gate's loop."""
        self._released_at.pop(conversation, None)
        held = self._held.pop(conversation, None)
        if held is not None:
            held.cancel()
            self.ended += 1
            self._give()

    def _expire(self, conversation: str) -> None:
        if self._held.pop(conversation, None) is not None:
            self._give()

    def _give(self) -> None:
        """One place back: to the first live waiter, else to the free count."""
        while self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        assert self._free is not None
        self._free += 1
