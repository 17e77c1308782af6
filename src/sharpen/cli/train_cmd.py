"""``sharpen checkpoint``: the embedded model as a Hugging Face checkpoint, for TRL."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sharpen.train.checkpoint import write_checkpoint


def checkpoint(
    out: Annotated[Path, typer.Argument(help="New folder for the checkpoint.")],
    gguf: Annotated[Path | None, typer.Option(
        help="GGUF model to convert (default: the embedded SmolLM2-135M-Instruct).")] = None,
) -> None:
    """Write the embedded model (or another GGUF model) as a float32 Hugging Face checkpoint
    with its tokenizer and chat template, for fine-tuning on `sharpen export` data with TRL."""
    console = Console(stderr=True)
    with console.status("de-quantizing the GGUF model…"):
        written = write_checkpoint(out, gguf)
    console.print(f"wrote {written} (load it with AutoModelForCausalLM.from_pretrained; "
                  "docs/training-data.md shows a TRL run)", highlight=False, markup=False)
