"""Multi-turn GRPO rollouts: TRL's ``rollout_func`` played by sharpen's own episode code.

:class:`EpisodeRollout` is the ``rollout_func`` TRL's ``GRPOTrainer`` calls once per generation
batch with the batch's prompts (each train prompt repeated ``num_generations`` times, one row
per completion it must return). For every row it plays a whole episode of the row's task with
:func:`sharpen.runner.episode.play_episode` — the spec's ``tool`` agent and the environment, as
``sharpen run`` plays it: no second agent loop — with the model being trained behind a
:class:`~sharpen.models.base.ChatModel`, :class:`PolicyModel`, and returns per episode:

- ``prompt_ids``: the first turn (system message and first observation) under the chat template
  with its generation prompt, tokenized as TRL tokenizes a single-turn prompt;
- ``completion_ids``: everything after it, in the order the model met it — each reply's exact
  sampled ids (its end-of-turn token included when it stopped on one), then the template's
  tokens of the environment's answer and of the next assistant header, then the next reply;
- ``env_mask``: 1 on the sampled ids, 0 on the environment's and the template's tokens
  between replies (TRL trains on the 1s only, ECHO reads the 0s as observation tokens);
- ``logprobs``: one per completion token — the sampled token's log-probability under the
  policy at ``temperature`` (as TRL computes its own: logits / temperature), 0.0 on env tokens;
- ``episode_reward``: the environment's outcome reward of the episode (as single-turn GRPO's
  :class:`~sharpen.train.rewards.VerifierReward`; ``None`` for an episode the harness failed —
  infra or env error — which TRL leaves out of its group baseline), forwarded by TRL to
  :class:`EpisodeReward`.

Each turn's context is the episode's own token list (prompt ids, then the completion so far),
not a re-rendering of the messages: the ids trained on are the ids the model sampled from.
The tokens between replies are the chat template's rendering of what follows the reply's text
(found with a marker, not by searching the text), tokenized in one pass as llama.cpp reads a
prompt; :mod:`sharpen.train.tokens` re-tokenizes the replies themselves, which a rollout must
not (and it drops an empty one), so its pieces are not used here. The trained GGUF, run as
``local``, re-tokenizes earlier replies of its context, which can differ from the sampled ids.
After each episode, decoding each run of ``env_mask`` 1s must give back the reply text the agent
read, else :class:`ValueError` — never a silent misalignment.

``max_completion`` caps the completion's total tokens (TRL does not truncate a rollout's
completion; its ``max_completion_length`` is set to this cap): a turn gets at most the room
left after the environment's tokens, and once nothing is left the model's replies are empty
(not recorded; the episode runs out its steps without it).

Sampling is in-process with Hugging Face ``generate`` on the trainer's current model, one reply
at a time (the environment's work of other episodes overlaps only while it runs in sandboxes),
seeded per episode and turn (:meth:`RunConfig.attempt_seed`, then the turn's index) in a forked
RNG: an episode samples the same whatever the order episodes run in, and the trainer's own
RNG is not touched.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.trajectory import Trajectory
from sharpen.models.base import BaseChatModel, Completion
from sharpen.models.local import _to_chat
from sharpen.runner.config import RunConfig
from sharpen.runner.episode import play_episode
from sharpen.train.rewards import Prompt

MARK = "\x00"
"""Put after the last reply's text to find where the environment's tokens begin."""


@dataclass
class Reply:
    """One sampled reply: its exact ids (end-of-turn token included when it stopped on one),
    their logprobs, and the text the agent read (the ids decoded, without that token)."""

    ids: list[int]
    logprobs: list[float]
    text: str


class PolicyModel(BaseChatModel):
    """A ChatModel over a torch causal LM and its tokenizer for ONE episode: it keeps the
    episode's token list (``prompt_ids``, ``completion_ids``, ``env_mask``, ``logprobs``) as
    the agent calls it. ``max_tokens`` caps a reply, ``max_completion`` the completion."""

    name = "grpo-policy"

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float, max_tokens: int,
                 max_completion: int, eos_ids: set[int]) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.max_tokens, self.max_completion = temperature, max_tokens, max_completion
        self.eos_ids = eos_ids
        self.first_turn: list[dict[str, Any]] | None = None
        self.prompt_ids: list[int] = []
        self.completion_ids: list[int] = []
        self.env_mask: list[int] = []
        self.logprobs: list[float] = []
        self.replies: list[Reply] = []
        self.full = False

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: Any = None) -> Completion:
        seed = int((params or {}).get("seed", 0)) + len(self.replies)
        if self.first_turn is None:
            self.first_turn = _to_chat(messages)
            self.prompt_ids = prompt_ids(self.tokenizer, self.first_turn)
            between: list[int] = []
        elif self.full:
            return _empty()
        else:
            between = self._between(messages)
        room = min(self.max_tokens, self.max_completion - len(self.completion_ids) - len(between))
        if room <= 0:
            self.full = True
            return _empty()
        self._extend(between, [0.0] * len(between), 0)
        context = self.prompt_ids + self.completion_ids
        ids, logprobs = self._sample(context, room, seed)
        self._extend(ids, logprobs, 1)
        stopped = bool(ids) and ids[-1] in self.eos_ids
        text = self.tokenizer.decode(ids[:-1] if stopped else ids)
        self.replies.append(Reply(ids, logprobs, text))
        return Completion(message=Message(role="assistant", content=text),
                          finish_reason="stop" if stopped else "length", model=self.name,
                          usage=Usage(input_tokens=len(context), output_tokens=len(ids), calls=1),
                          logprobs=logprobs, token_ids=ids)

    def _extend(self, ids: list[int], logprobs: list[float], mask: int) -> None:
        self.completion_ids += ids
        self.logprobs += logprobs
        self.env_mask += [mask] * len(ids)

    def _between(self, messages: list[Message]) -> list[int]:
        """The tokens after the last reply: the template's closing of it (unless the reply's
        own end-of-turn token did), the environment's answer (the messages after it) and the
        next assistant header, under the chat template. Found by rendering the conversation
        with a marker after the reply's text: what follows the marker is the environment's."""
        chat = _to_chat(messages)
        last = max(k for k, m in enumerate(chat) if m["role"] == "assistant")
        marked = [dict(m, content=m["content"] + MARK) if k == last else m
                  for k, m in enumerate(chat)]
        full = self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        rendered = self.tokenizer.apply_chat_template(marked, tokenize=False,
                                                      add_generation_prompt=True)
        if rendered.count(MARK) != 1 or rendered.replace(MARK, "") != full:
            raise ValueError("the chat template changes the reply's text: no exact multi-turn "
                             "tokens")
        after = rendered.split(MARK, 1)[1]
        eos: str = self.tokenizer.eos_token or ""
        reply = self.replies[-1].ids
        if eos and after.startswith(eos) and reply and reply[-1] in self.eos_ids:
            after = after[len(eos):]  # the reply sampled its end-of-turn token itself
        return list(self.tokenizer(after, add_special_tokens=False)["input_ids"])

    def _sample(self, context: list[int], max_new: int, seed: int) -> tuple[list[int], list[float]]:
        import torch
        from transformers import GenerationConfig

        device = next(self.model.parameters()).device
        ids = torch.tensor([context], device=device)
        config = GenerationConfig(
            do_sample=True, temperature=self.temperature, top_k=0, top_p=1.0,
            max_new_tokens=max_new, eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.tokenizer.pad_token_id, return_dict_in_generate=True,
            output_scores=True)
        forked = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=forked), torch.no_grad():
            torch.manual_seed(seed)
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                      generation_config=config)
        new = out.sequences[0, len(context):]
        # The scores are the logits as sampled from (here: divided by the temperature, TRL's
        # convention for its own logprobs).
        scores = torch.stack(out.scores, dim=1)[0, : len(new)].float()
        picked = torch.log_softmax(scores, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        return [int(t) for t in new.tolist()], [float(v) for v in picked.tolist()]


def _empty() -> Completion:
    return Completion(message=Message(role="assistant", content=""), finish_reason="length")


def prompt_ids(tokenizer: Any, chat: list[dict[str, Any]]) -> list[int]:
    """The first turn's ids: the chat template with its generation prompt, tokenized (as TRL
    tokenizes a conversational prompt)."""
    rendered = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    ids = rendered["input_ids"] if hasattr(rendered, "keys") else rendered
    return [int(i) for i in ids]


@dataclass
class Episode:
    """One rollout: the trajectory the runner's episode code filled and its tokens."""

    trajectory: Trajectory
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    replies: list[Reply]
    reward: float | None


def check_episode(episode: Episode, tokenizer: Any, eos_ids: set[int]) -> None:
    """:class:`ValueError` unless ids, ``env_mask`` and logprobs are as long, the runs of
    ``env_mask`` 1s are the sampled replies, and each decodes (without its end-of-turn token)
    to the text of the reply the agent read, as the trajectory stored it."""
    n = len(episode.completion_ids)
    if not len(episode.env_mask) == len(episode.logprobs) == n:
        raise ValueError(f"episode {episode.trajectory.id}: ids, env_mask and logprobs differ "
                         f"in length ({n}, {len(episode.env_mask)}, {len(episode.logprobs)})")
    runs = model_runs(episode.completion_ids, episode.env_mask)
    said = [m.content or "" for m in episode.trajectory.messages if m.role == "assistant"]
    if runs != [r.ids for r in episode.replies] or len(said) < len(runs):
        raise ValueError(f"episode {episode.trajectory.id}: the env_mask 1s are not the "
                         "sampled replies")
    for run, text in zip(runs, said, strict=False):
        body = run[:-1] if run[-1] in eos_ids else run
        if (decoded := tokenizer.decode(body)) != text:
            raise ValueError(f"episode {episode.trajectory.id}: a reply's tokens decode to "
                             f"{decoded!r}, the agent read {text!r}")


def model_runs(ids: Sequence[int], env_mask: Sequence[int]) -> list[list[int]]:
    """The runs of consecutive ``env_mask`` 1s of ``ids``: one per reply."""
    runs: list[list[int]] = []
    for k, (token, mask) in enumerate(zip(ids, env_mask, strict=True)):
        if mask:
            if k == 0 or not env_mask[k - 1]:
                runs.append([])
            runs[-1].append(token)
    return runs


@dataclass
class EpisodeRollout:
    """TRL ``rollout_func``: an episode per prompt row (see the module docstring).
    ``rows``: the train tasks' first turns (:func:`~sharpen.train.rewards.prompts`), by which a
    row's prompt finds its task. ``last``: the episodes of the latest call."""

    env: PluginRef
    spec: AgentSpec
    rows: Sequence[Prompt]
    temperature: float
    max_tokens: int
    max_completion: int
    eos_ids: set[int]
    concurrency: int = 4
    seed: int = 0
    registry: Registry = REGISTRY
    last: list[Episode] = field(default_factory=list)
    _calls: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_prompt = {_key(r.messages): r for r in reversed(self.rows)}  # first task wins
        self.config = RunConfig(env=self.env, agent=self.spec, tasks=[r.task for r in self.rows],
                                seed=self.seed)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        step = int(trainer.state.global_step)
        call = self._calls.get(step, 0)  # generation batches within one optimiser step
        self._calls = {step: call + 1}
        first = (step * 1000 + call) * len(prompts)  # each episode its own seed, resumes alike
        episodes = asyncio.run(self.play(prompts, model, trainer.processing_class, first))
        return {"prompt_ids": [e.prompt_ids for e in episodes],
                "completion_ids": [e.completion_ids for e in episodes],
                "logprobs": [e.logprobs for e in episodes],
                "env_mask": [e.env_mask for e in episodes],
                "episode_reward": [e.reward for e in episodes]}

    async def play(self, prompts: list[Any], model: Any, tokenizer: Any,
                   first_epoch: int = 0) -> list[Episode]:
        """One episode per prompt (conversational: a list of ``{role, content}``), epochs
        ``first_epoch``, ``first_epoch + 1``, ... (their seeds); checked by
        :func:`check_episode`."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(k: int, prompt: Any) -> Episode:
            row = self.by_prompt.get(_key(prompt))
            if row is None:
                raise ValueError("a prompt of the batch is no train task's first turn")
            policy = PolicyModel(model, tokenizer, temperature=self.temperature,
                                 max_tokens=self.max_tokens, max_completion=self.max_completion,
                                 eos_ids=self.eos_ids)
            async with gate:
                traj = await play_episode(self.config, "grpo", policy, row.task,
                                          first_epoch + k, self.registry)
            return self._episode(traj, policy, prompt, tokenizer)

        self.last = list(await asyncio.gather(*(one(k, p) for k, p in enumerate(prompts))))
        return self.last

    def _episode(self, traj: Trajectory, policy: PolicyModel, prompt: Any,
                 tokenizer: Any) -> Episode:
        outcome = traj.outcome
        reward = float(outcome.reward) if outcome is not None and outcome.counts else None
        if not policy.replies:  # the harness failed before the first reply: nothing to train
            eos = min(self.eos_ids)
            return Episode(traj, prompt_ids(tokenizer, list(prompt)), [eos], [0], [0.0], [], None)
        if _key(policy.first_turn or []) != _key(prompt):
            raise ValueError(f"episode {traj.id}: the agent's first turn is not the batch's "
                             "prompt (the dataset and the agent build it differently)")
        episode = Episode(traj, policy.prompt_ids, policy.completion_ids, policy.env_mask,
                          policy.logprobs, policy.replies, reward)
        check_episode(episode, tokenizer, self.eos_ids)
        return episode


def _key(messages: Any) -> str:
    return json.dumps([{"role": m["role"], "content": m["content"]} for m in messages])


@dataclass
class EpisodeReward:
    """TRL reward function: the ``episode_reward`` :class:`EpisodeRollout` forwarded for each
    completion. ``scored`` counts episodes (the samples budget)."""

    scored: int = 0

    def __call__(self, prompts: list[Any], completions: list[Any],
                 episode_reward: list[float | None], **_: Any) -> list[float | None]:
        self.scored += len(episode_reward)
        return list(episode_reward)
