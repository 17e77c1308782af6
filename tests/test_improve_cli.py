"""``sharpen improve`` end to end through the real CLI, on the cassette recorded from the
embedded model by tests/record_improve_cassette.py (the same experiment, spelled as flags)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from conftest import sharpen
from record_improve_cassette import config

from sharpen.improvement.folder import experiments_base

FLAGS = ["-E", "source=generated", "-E", "max_submissions=1", "--proposer", "reflexion",
         "--proposer-arg", "max_trials=4", "--train", "10", "--val", "3", "--test", "6",
         "--minibatch", "10", "--budget-rollouts", "80"]


def test_improve_reports_resumes_and_writes_the_winner(tmp_path: Path):
    spec = tmp_path / "seed.yaml"
    spec.write_text(yaml.safe_dump(config("replay").seed_spec.model_dump(mode="json")))
    store = ["--store", f"sqlite:///{tmp_path}/s.db"]
    out = tmp_path / "improved.yaml"
    first = sharpen("improve", "code", *FLAGS, "--agent", str(spec), *store, "--out", str(out),
                    "--plot", str(tmp_path / "plots"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    text = first.stdout
    assert "this budget buys about" in text
    assert "Budget account" in text and "Held-out test (6 tasks" in text
    assert "lineage:" in text
    assert ("held-out gain:" in text) or ("no detectable gain on held-out tasks" in text)
    assert out.exists() and (tmp_path / "plots" / "anytime.png").exists()
    # Checkpoints and the report live next to the SQLite store, where the viewer looks.
    assert len(list((tmp_path / "improve").glob("*/result.json"))) == 1
    hint = re.search(r"sharpen view --store (\S+)  → /improve/([0-9a-f]{12})", text)
    assert hint and hint.group(1) == store[1]
    assert (experiments_base(hint.group(1)) / hint.group(2) / "config.json").is_file()

    again = sharpen("improve", "code", *FLAGS, "--agent", str(spec), *store, cwd=tmp_path)
    assert again.returncode == 2
    assert "already has a checkpoint" in again.stderr and "--resume" in again.stderr

    resumed = sharpen("improve", "code", *FLAGS, "--agent", str(spec), *store, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    # The finished engine is not run again: the same account, no new evaluation.
    assert "seed: val" not in resumed.stdout
    for line in ("Held-out test", "lineage:"):
        assert line in resumed.stdout


def test_improve_names_the_fix_for_bad_input(tmp_path: Path):
    bad = sharpen("improve", "code", "--proposer", "reflexon", cwd=tmp_path)
    assert bad.returncode == 2 and "did you mean 'reflexion'" in bad.stderr
    none = sharpen("improve", "code", "--budget-rollouts", "0", cwd=tmp_path)
    assert none.returncode == 2 and "budget" in none.stderr
