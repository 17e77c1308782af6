"""``sharpen checkpoint`` and ``sharpen gguf``: the embedded model to a Hugging Face checkpoint
for TRL, and a trained checkpoint back to a GGUF file the ``local`` model runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sharpen.train.checkpoint import write_checkpoint, write_gguf


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


def to_gguf(
    checkpoint: Annotated[Path, typer.Argument(help="Checkpoint folder a trainer saved.")],
    out: Annotated[Path, typer.Argument(help="New .gguf file.")],
    template: Annotated[Path | None, typer.Option(
        help="The GGUF model the checkpoint came from (default: the embedded model).")] = None,
    dtype: Annotated[str, typer.Option(help="Storage of the matrices: f32 or f16.")] = "f32",
) -> None:
    """Write a trained checkpoint as a GGUF file, with the metadata of the model it came from,
    so the embedded runner loads it: --model local --model-arg model_path=OUT."""
    console = Console(stderr=True)
    with console.status("writing the GGUF file…"):
        written = write_gguf(checkpoint, out, template, dtype)
    console.print(f"wrote {written} (run it: sharpen run ENV --model local --model-arg "
                  f"model_path={written})", highlight=False, markup=False)
