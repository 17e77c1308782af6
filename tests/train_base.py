"""The start model of every training test, written once per session: the embedded model as a
float32 Hugging Face checkpoint (``sharpen checkpoint``, ~30 s) and that checkpoint back as a
float32 GGUF (what a trained model is compared against: same weights, same format)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def base_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only-by-convention checkpoint folder of the embedded model: copy it before
    training writes into the same folder (methods write elsewhere, under their workdir)."""
    pytest.importorskip("trl")
    from sharpen.train.checkpoint import write_checkpoint

    return write_checkpoint(tmp_path_factory.mktemp("train-base") / "smollm2")


@pytest.fixture(scope="session")
def base_gguf(base_checkpoint: Path) -> Path:
    """``base_checkpoint`` as a float32 GGUF file (``sharpen gguf``)."""
    from sharpen.train.checkpoint import write_gguf

    return write_gguf(base_checkpoint, base_checkpoint.parent / "smollm2-f32.gguf")
