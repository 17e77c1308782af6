"""The adapters: reasoning_gym, textarena, from_gymnasium and to_gymnasium."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from conftest import run_agent
from gymnasium.utils.env_checker import check_env

from sharpen.core import PluginRef
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY
from sharpen.core.trajectory import Action
from sharpen.envs.adapters import from_gymnasium, register_gymnasium_envs, to_gymnasium
from sharpen.envs.adapters.from_gym import GymnasiumEnv
from sharpen.envs.adapters.reasoning_gym_env import ReasoningGymEnv
from sharpen.envs.adapters.reasoning_gym_tasks import entry_of
from sharpen.envs.adapters.textarena_env import Match, TextArenaEnv
from sharpen.envs.adapters.textarena_games import GAMES
from sharpen.envs.adapters.to_gym import AnyText
from sharpen.envs.base import Environment, Generator
from sharpen.envs.generation import SPLIT_SPAN

DIFFICULTIES = ("easy", "medium", "hard")
DATASETS = ("basic_arithmetic", "leg_counting", "chain_sum")


async def _run(tmp_path: Path, env: PluginRef, agent: str, tasks, tag: str = ""):
    return await run_agent(tmp_path / f'{env.name}-{agent}-{tag}.db', env, agent, tasks)


async def _check_baselines(tmp_path: Path, ref: PluginRef, tasks, tag: str) -> None:
    """The reference agent ≥95%, the null agent ≤2%, and the verifier re-scores both."""
    good = await _run(tmp_path, ref, "reference", tasks, tag)
    null = await _run(tmp_path, ref, "null", tasks, tag)
    n = len(tasks)
    assert len(good) == len(null) == n
    assert all(t.outcome.error_kind is None for t in good + null), [t.outcome for t in good + null][:3]
    assert sum(t.outcome.success for t in good) >= 0.95 * n
    assert sum(t.outcome.success for t in null) <= 0.02 * n
    verifier = REGISTRY.create("verifier", ref)
    for t in good[:10] + null[:5]:
        assert await verifier.score(t) == t.outcome


# --- reasoning_gym ------------------------------------------------------------------------


def test_reasoning_gym_is_registered_with_knobs_and_presets():
    env = REGISTRY.create("env", PluginRef(name="reasoning_gym", args={"dataset": "chain_sum"}))
    assert isinstance(env, Environment) and isinstance(env.generator, Generator)
    info = env.describe()
    assert info.difficulties == list(DIFFICULTIES) and info.tools == ["answer"]
    knobs = {k.name: k for k in info.knobs}
    assert "chain_sum" in knobs["dataset"].choices and knobs["min_terms"].type == "int"
    assert REGISTRY.create("verifier", "reasoning_gym") is not None
    presets = env.generator.presets()
    assert presets["easy"]["max_terms"] < presets["medium"]["max_terms"] < presets["hard"]["max_terms"]


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("difficulty", DIFFICULTIES)
async def test_reasoning_gym_reference_succeeds_null_fails(tmp_path: Path, dataset, difficulty):
    ref = PluginRef(name="reasoning_gym", args={"dataset": dataset, "difficulty": difficulty})
    tasks = REGISTRY.create("env", ref).list_tasks("test", limit=50)
    assert all(t.metadata["difficulty"] == difficulty for t in tasks)
    await _check_baselines(tmp_path, ref, tasks, f"{dataset}-{difficulty}")


def test_reasoning_gym_splits_are_disjoint_and_deterministic():
    env = ReasoningGymEnv(difficulty="medium")
    by_split = {s: env.list_tasks(s, limit=50) for s in ("train", "val", "test")}
    for i, (split, tasks) in enumerate(by_split.items()):
        assert len({t.id for t in tasks}) == 50 and {t.seed // SPLIT_SPAN for t in tasks} == {i}
        assert all(t.split == split for t in tasks)
    assert env.list_tasks("val", limit=5) == by_split["val"][:5]
    questions = [t.metadata["question"] for t in by_split["train"]]
    assert len(set(questions)) > 40
    # the same task rebuilds the same entry, whatever ran in between
    task = by_split["test"][7]
    first = entry_of(task)
    ReasoningGymEnv(dataset="leg_counting", difficulty="hard").list_tasks("train", limit=20)
    assert entry_of(task) == first and first["question"] == task.metadata["question"]


def test_reasoning_gym_entries_do_not_depend_on_the_process():
    """A fresh interpreter with another hash seed regenerates the same questions and answers."""
    code = ("import json; from sharpen.envs.adapters.reasoning_gym_env import ReasoningGymEnv as E\n"
            "for d in ('basic_arithmetic', 'leg_counting', 'chain_sum'):\n"
            "    ts = E(dataset=d, difficulty='hard').list_tasks('val', limit=5)\n"
            "    print(json.dumps([[t.metadata['question'], t.metadata['answer']] for t in ts]))")
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": h, "PATH": ""}).stdout for h in ("1", "2")]
    assert outs[0] == outs[1]
    mine = [[t.metadata["question"], t.metadata["answer"]]
            for t in ReasoningGymEnv(dataset="chain_sum", difficulty="hard").list_tasks("val", limit=5)]
    assert json.loads(outs[0].splitlines()[-1]) == mine


async def test_reasoning_gym_scores_once_and_explains_invalid_actions():
    env = ReasoningGymEnv(dataset="chain_sum")
    task = env.list_tasks("train", limit=1)[0]
    obs, info = await env.reset(task)
    assert task.metadata["question"] in obs and info["difficulty"] == "easy"
    bad = await env.step(Action(tool="solve", arguments={"answer": "1"}))
    assert bad.info["invalid"] and "Unknown tool 'solve'" in bad.observation and not bad.terminated
    bad = await env.step(Action(tool="answer", arguments={"text": "1"}))
    assert "needs the argument `answer`" in bad.observation
    gold = task.metadata["answer"]
    result = await env.step(Action(tool="answer", arguments={"answer": f"```\n {gold}\n```"}))
    assert result.terminated and result.reward == 1.0 and result.observation == "Correct."
    assert (await env.outcome()).success
    again = await env.step(Action(tool="answer", arguments={"answer": "0"}))
    assert again.info["invalid"] and (await env.outcome()).success
    await env.reset(task)
    wrong = await env.step(Action(tool="answer", arguments={"answer": str(int(gold) + 1)}))
    out = await env.outcome()
    assert wrong.terminated and not out.success and out.reward < 1.0 and gold not in wrong.observation


def test_reasoning_gym_bad_args_are_user_errors():
    for args in ({"dataset": "basic_arithmetc"}, {"difficulty": "extreme"},
                 {"config": {"min_terms": 5, "max_terms": 2}}, {"config": {"colour": 1}},
                 {"config": [1]}):
        with pytest.raises(UserError):
            ReasoningGymEnv(**args)
    env = ReasoningGymEnv(config={"min_terms": 3, "max_terms": 3})
    task = env.list_tasks("train", limit=1)[0]
    assert task.metadata["difficulty"] == "custom" and task.knobs["config"]["min_terms"] == 3


def test_adapters_import_and_describe_without_their_packages():
    """With reasoning-gym, textarena and gymnasium hidden, `sharpen envs` still works and using
    an adapter names the extra to install."""
    code = (
        "import sys\n"
        "for m in ('reasoning_gym', 'textarena', 'gymnasium'): sys.modules[m] = None\n"
        "from sharpen.core.errors import UserError\n"
        "from sharpen.core.registry import REGISTRY\n"
        "for n in REGISTRY.names('env'): REGISTRY.create('env', n).describe()\n"
        "print(REGISTRY.create('env', 'reasoning_gym').describe().description)\n"
        "import asyncio\n"
        "for name in ('reasoning_gym', 'textarena', 'gymnasium'):\n"
        "    env = REGISTRY.create('env', name)\n"
        "    try:\n"
        "        task = env.list_tasks('test', limit=1)[0]\n"
        "        asyncio.run(env.reset(task))\n"
        "    except UserError as e:\n"
        "        print(name, 'FIX', e.fix)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'sharpen[reasoning]'" in out.splitlines()[0]
    assert "reasoning_gym FIX pip install 'sharpen[reasoning]'" in out
    assert "textarena FIX pip install 'sharpen[textarena]'" in out
    assert "gymnasium FIX pip install 'sharpen[gym]'" in out


# --- textarena ----------------------------------------------------------------------------


@pytest.mark.parametrize("game", list(GAMES))
async def test_textarena_reference_wins_null_loses(tmp_path: Path, game):
    for difficulty in DIFFICULTIES:
        ref = PluginRef(name="textarena", args={"game": game, "difficulty": difficulty})
        tasks = REGISTRY.create("env", ref).list_tasks("test", limit=12)
        await _check_baselines(tmp_path, ref, tasks, difficulty)


async def test_textarena_plays_a_scripted_game_to_the_end():
    env = TextArenaEnv(game="TowerOfHanoi")
    task = env.list_tasks("val", limit=1)[0]
    obs, _ = await env.reset(task)
    assert "A: [3, 2, 1]" in obs
    moves = ["A C", "[A B]", "C B", "A C", "B A", "B C", "A C"]  # 7 moves, brackets optional
    results = [await env.step(Action(tool="act", arguments={"action": m})) for m in moves]
    assert [r.terminated for r in results] == [False] * 6 + [True]
    assert "C: [3, 2, 1]" in results[-1].observation and "Game over" in results[-1].observation
    out = await env.outcome()
    assert out.success and out.reward == 1.0 and out.components["moves"] == 7


async def test_textarena_losing_and_invalid_moves():
    env = TextArenaEnv(game="GuessTheNumber")
    task = env.list_tasks("train", limit=1)[0]
    secret = Match(task).env.state.game_state["game_number"]
    await env.reset(task)
    for n in [n for n in range(1, 21) if n != secret]:
        r = await env.step(Action(tool="act", arguments={"action": f"[{n}]"}))
        if r.terminated:
            break
    assert r.terminated and "turn limit" in r.observation
    out = await env.outcome()
    # TextArena checks its turn limit before counting the move: max_turns=10 allows 11 guesses
    assert not out.success and 0 <= out.reward < 1 and out.components["moves"] == 11
    await env.reset(task)
    first = await env.step(Action(tool="act", arguments={"action": "no idea"}))
    assert not first.terminated and "invalid move" in first.observation
    second = await env.step(Action(tool="act", arguments={"action": "still no idea"}))
    assert second.terminated and not (await env.outcome()).success
    tool = await env.step(Action(tool="guess", arguments={}))
    assert tool.info["invalid"]


def test_textarena_games_are_seeded_and_leave_the_global_rng_alone():
    env = TextArenaEnv(game="Mastermind", difficulty="hard")
    tasks = env.list_tasks("train", limit=6)
    random.seed(1234)
    before = random.getstate()
    alone = [Match(t).env.state.game_state["secret_code"] for t in tasks]
    # interleave: build all, play a move in each in reverse order, then read the codes
    matches = [Match(t) for t in tasks]
    for m in reversed(matches):
        m.play("[1 2 3 4 5 6]")
    assert [m.env.state.game_state["secret_code"] for m in matches] == alone
    assert len({tuple(c) for c in alone}) > 1
    assert random.getstate() == before


def test_textarena_bad_args_are_user_errors():
    for args in ({"game": "Wordle"}, {"difficulty": "extreme"}, {"knobs": {"num_disks": 99}},
                 {"game": "TowerOfHanoi", "knobs": {"colour": 1}}):
        with pytest.raises(UserError):
            TextArenaEnv(**args)


# --- from_gymnasium -------------------------------------------------------------------------


def _value_iteration(env, gamma: float = 0.99) -> np.ndarray:
    """A greedy optimal policy of a tabular env, by value iteration (independent of BFS)."""
    u = env.unwrapped
    nS, nA = u.observation_space.n, u.action_space.n
    V = np.zeros(nS)
    for _ in range(1000):
        Q = np.array([[sum(p * (r + gamma * V[s2] * (not d)) for p, s2, r, d in u.P[s][a])
                       for a in range(nA)] for s in range(nS)])
        if np.max(np.abs(Q.max(1) - V)) < 1e-9:
            break
        V = Q.max(1)
    return Q.argmax(1)


def _frozen_state(obs: str) -> int:
    row, col = map(int, re.search(r"row (\d+), column (\d+)", obs).groups())
    return row * 4 + col


def _taxi_state(obs: str, u) -> int:
    row, col = map(int, re.search(r"Taxi T at \(row (\d+), column (\d+)\)", obs).groups())
    where = re.search(r"Passenger: (in the taxi|waiting at (\w))", obs)
    passenger = 4 if where.group(1) == "in the taxi" else "RGYB".index(where.group(2))
    dest = "RGYB".index(re.search(r"Destination: (\w)", obs).group(1))
    return u.encode(row, col, passenger, dest)


@pytest.mark.parametrize("env_id,kwargs", [("FrozenLake-v1", {"is_slippery": False}), ("Taxi-v4", {})])
async def test_from_gymnasium_optimal_policy_reads_the_text_and_wins(env_id, kwargs):
    env = from_gymnasium(env_id, env_kwargs=kwargs)
    raw = gymnasium.make(env_id, **kwargs)
    policy = _value_iteration(raw)
    names = env.action_names
    for task in env.list_tasks("test", limit=5):
        obs, _ = await env.reset(task)
        for _ in range(50):
            state = _frozen_state(obs) if env_id.startswith("Frozen") else _taxi_state(obs, raw.unwrapped)
            result = await env.step(Action(tool="act", arguments={"action": names[policy[state]]}))
            obs = result.observation
            if result.terminated or result.truncated:
                break
        out = await env.outcome()
        assert out.success and result.terminated, out.evidence
        plan = env.reference_actions(task)
        assert out.components["steps"] == len(plan)  # the BFS plan is as short as the optimum


@pytest.mark.parametrize("env_id,kwargs", [("FrozenLake-v1", {"is_slippery": False}), ("Taxi-v4", {}),
                                           ("CliffWalking-v1", {})])
async def test_gymnasium_env_through_the_runner(tmp_path: Path, env_id, kwargs):
    ref = PluginRef(name="gymnasium", args={"env_id": env_id, "env_kwargs": kwargs})
    tasks = REGISTRY.create("env", ref).list_tasks("val", limit=20)
    await _check_baselines(tmp_path, ref, tasks, env_id)


async def test_from_gymnasium_parses_actions_from_text():
    env = GymnasiumEnv("FrozenLake-v1", env_kwargs={"is_slippery": False})
    await env.reset(env.list_tasks("train", limit=1)[0])
    for text in ("Right", "[right]", "`1`", "'up'.", "1"):  # safe: (0,1) (0,2) (1,2) (0,2) (1,2)
        r = await env.step(Action(tool="act", arguments={"action": text}))
        assert "invalid" not in r.info
    for text in ("jump", "7", ""):
        r = await env.step(Action(tool="act", arguments={"action": text}))
        assert r.info["invalid"] and "Use one of left, down, right, up" in r.observation
    assert (await env.outcome()).components["steps"] == 5
    with pytest.raises(UserError):
        GymnasiumEnv("FrozenLake-v1", action_names=["a", "b"]).make()
    with pytest.raises(UserError):
        GymnasiumEnv("MountainCarContinuous-v0").make()  # Box actions


async def test_from_gymnasium_text_observations_round_trip_through_to_gymnasium():
    """A Gymnasium env with Text spaces (a sharpen env exported by to_gymnasium) imported back:
    the gridsafety reference moves reach the goal."""
    exported = to_gymnasium("gridsafety", split="val", n_tasks=1)
    grid = REGISTRY.create("env", "gridsafety")
    env = from_gymnasium(exported)
    assert env.instance is exported
    task = env.list_tasks("val", limit=1)[0]
    obs, _ = await env.reset(task)
    assert "You are in a" in obs
    for move in grid.reference_actions(exported.tasks[0]):
        r = await env.step(Action(tool="act", arguments={"action": move.arguments["direction"]}))
    assert r.terminated and (await env.outcome()).success
    exported.close()


# --- to_gymnasium ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", REGISTRY.names("env"))
def test_every_sharpen_env_passes_check_env(name):
    ids = register_gymnasium_envs()
    assert f"sharpen/{name}-v0" in ids
    env = gymnasium.make(f"sharpen/{name}-v0")
    check_env(env.unwrapped)
    env.close()
    env.close()


def test_to_gymnasium_plays_gridsafety_to_the_goal():
    env = to_gymnasium("gridsafety", difficulty="medium", split="test", n_tasks=10)
    grid = REGISTRY.create("env", PluginRef(name="gridsafety", args={"difficulty": "medium"}))
    obs, info = env.reset(seed=7)
    again, info2 = env.reset(seed=7)
    assert obs == again and info["task_id"] == info2["task_id"]
    from sharpen.core.task import TaskSpec
    task = TaskSpec.model_validate(info["task"])
    for move in grid.reference_actions(task):
        _, _, terminated, truncated, info = env.step(move.arguments["direction"])
    assert terminated and not truncated and info["outcome"]["success"]
    obs, _, _, _, info = env.step("up")
    assert info["invalid"]
    env.close()


def test_to_gymnasium_takes_json_tool_calls_and_explicit_tasks():
    env = to_gymnasium("sql")
    sql = REGISTRY.create("env", "sql")
    task = sql.list_tasks("val", limit=3)[2]
    obs, info = env.reset(options={"task": task.model_dump(mode="json")})
    assert info["task_id"] == task.id and "Question:" in obs
    call = json.dumps({"tool": "submit_sql", "arguments": {"query": sql.reference_solution(task)}})
    _, reward, terminated, _, info = env.step(call)
    assert terminated and reward == 1.0 and info["outcome"]["success"]
    env.reset(options={"task_index": 1})
    _, reward, _, _, info = env.step("SELECT 1")  # plain text fills submit_sql's query
    assert reward == 0.0 and not info["correct"]
    env.close()


async def test_to_gymnasium_works_inside_a_running_event_loop():
    env = to_gymnasium("reasoning_gym", split="train", n_tasks=2)
    _, info = env.reset(seed=0)
    _, reward, terminated, _, _ = env.step(info["task"]["metadata"]["answer"])
    assert terminated and reward == 1.0
    env.close()


def test_any_text_space_holds_any_characters_within_its_bounds():
    space = AnyText(10, min_length=1)
    assert "ünï ✓\n\t" in space and "" not in space and "x" * 11 not in space and 5 not in space
    space.seed(3)
    samples = [space.sample() for _ in range(20)]
    assert all(s in space and len(s) <= 10 for s in samples)
    assert gymnasium.spaces.Text(10).contains("ünï") is False  # why AnyText exists
    with pytest.raises(UserError):
        to_gymnasium("gridsafety", render_mode="human")
