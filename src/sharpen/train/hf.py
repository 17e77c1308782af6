"""What every training method does with Hugging Face models: pick the device, load a checkpoint
(optionally with a LoRA adapter), save a trained model as a plain checkpoint (a LoRA adapter
merged in), and build the common TRL arguments.

One place for it so that ``star``, ``rerest``, ``dpo``, ``grpo`` and ``reward-model`` load,
place and save models the same way, and a GPU path is the CPU path with another device (no
GPU-only code: the CPU tests exercise every line). Needs the ``train`` extra; imported lazily.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from sharpen.core.errors import UserError
from sharpen.train.checkpoint import INSTALL_FIX

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


class LoraSpec(BaseModel):
    """A LoRA adapter (``peft``): rank, scale, dropout and which projections it wraps."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj"]


def pick_device(requested: str | None = None) -> str:
    """``requested`` when given (``cpu``, ``cuda``, ``cuda:1``), else ``cuda`` where torch sees a
    GPU, else ``cpu``. :class:`UserError` for ``cuda`` on a machine without one."""
    try:
        import torch
    except ImportError:
        raise UserError("training needs PyTorch", INSTALL_FIX) from None
    if requested:
        if requested.startswith("cuda") and not torch.cuda.is_available():
            raise UserError(f"--device {requested}: torch sees no GPU here", "use --device cpu")
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_tokenizer(checkpoint: str | Path) -> PreTrainedTokenizerBase:
    """The checkpoint's tokenizer (with its chat template), a pad token set (SmolLM2 has one;
    a model without gets its end-of-sequence token)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UserError("training needs transformers", INSTALL_FIX) from None
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(checkpoint: str | Path, device: str = "cpu", lora: LoraSpec | None = None,
               *, head: str = "causal") -> PreTrainedModel:
    """The checkpoint as a float32 model on ``device``; with ``lora``, wrapped in a fresh LoRA
    adapter (only the adapter trains). ``head="score"`` loads a sequence-classification model
    with one output (a reward model's scalar head, initialised fresh). :class:`UserError` when
    the folder is not a checkpoint."""
    if not (Path(checkpoint) / "config.json").is_file():
        raise UserError(f"{checkpoint} is not a checkpoint folder (no config.json)",
                        "pass a folder written by `sharpen checkpoint` or by a trainer")
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    except ImportError:
        raise UserError("training needs PyTorch and transformers", INSTALL_FIX) from None
    if head == "score":
        model = AutoModelForSequenceClassification.from_pretrained(
            str(checkpoint), num_labels=1, dtype=torch.float32)
        pad = load_tokenizer(checkpoint).pad_token_id
        model.config.pad_token_id = pad  # the head reads the last non-pad token
    else:
        model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32)
    model.to(device)
    if lora is not None:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise UserError("LoRA needs peft", "pip install 'sharpen[train]'") from None
        model = get_peft_model(model, LoraConfig(
            r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
            target_modules=lora.target_modules,
            task_type="SEQ_CLS" if head == "score" else "CAUSAL_LM"))
    return model


def save_checkpoint(model: Any, tokenizer: Any, out: str | Path) -> Path:
    """Save ``model`` (a LoRA adapter merged into its base first) and ``tokenizer`` to ``out``
    as a plain checkpoint that :func:`~sharpen.train.checkpoint.write_gguf` converts; returns
    ``out``."""
    out = Path(out)
    if hasattr(model, "merge_and_unload"):  # a peft model: the GGUF needs plain weights
        model = model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest ``checkpoint-N`` folder a trainer saved under ``output_dir`` (the resume
    point), ``None`` when there is none (or no folder yet)."""
    if not Path(output_dir).is_dir():
        return None
    from transformers.trainer_utils import get_last_checkpoint

    found = get_last_checkpoint(str(output_dir))
    return Path(found) if found else None


def fit(trainer: Any, resume_from: str | Path | None = None) -> int:
    """Run a ``transformers`` / TRL trainer, from the checkpoint ``resume_from`` when given, and
    return the global step it reached. Its ``PrinterCallback`` is removed first: with
    ``disable_tqdm`` (:func:`trl_args`) transformers prints every log line to stdout, which
    ``--json`` keeps for the JSON alone; methods report through ``ctx.report`` instead."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    return int(trainer.state.global_step)


def trl_args(device: str, output_dir: str | Path, seed: int, **overrides: Any) -> dict[str, Any]:
    """The keyword arguments every TRL config of a sharpen method shares: no reporting to
    outside services, the CPU when the device is one, float32 there, a seed, a step log;
    ``overrides`` (the method's own settings, then ``--trainer-arg``s) win.

    Float32 on the CPU because TRL's configs default to ``bf16=True``, which on the CPU means
    bfloat16 autocast: on a CPU without native bfloat16 arithmetic (no AVX512-BF16 or AMX) an
    SFT step of the embedded model took 9.3x as long under it as in float32 (76.5 s against
    8.2 s, ``benchmarks/cpu_precision.py``, 2026-12-06). ``--trainer-arg bf16=true`` turns it
    back on; a GPU keeps TRL's default."""
    return {
        "output_dir": str(output_dir),
        "report_to": [],
        "use_cpu": device == "cpu",
        **({"bf16": False} if device == "cpu" else {}),
        "seed": seed,
        "logging_steps": 1,
        "save_strategy": "no",
        "disable_tqdm": True,  # the engine draws its own bar
        **overrides,
    }
