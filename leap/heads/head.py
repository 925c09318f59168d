"""EAGLE's feature head: a one-layer draft model over the verifier's own top-layer features.

EAGLE (Li et al., 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty") drafts
at the *feature* level: at position ``t`` the head reads the verifier's top-layer feature ``f_t`` and the
embedding of the token that followed it, ``e(x_{t+1})``, and predicts the next feature ``f_{t+1}``; the
target's own LM head turns a predicted feature into a draft distribution for ``x_{t+2}``. Drafting
further feeds the predicted feature back in with the drafted token's embedding. Architecture (EAGLE-1):

    f_hat_{t+1} = norm(layer(fc([f_t ; enorm(e(x_{t+1}))])))

``fc`` maps ``2H -> H``; ``layer`` is one decoder layer of the target's own architecture, initialised
from a copy of one of its layers (the last by default) with its residual branches' output projections
(``o_proj``, ``down_proj``) zeroed - so the untrained head is ``norm(fc(...))`` and the copied layer's
large top-layer outputs (norms ~800 on SmolLM2) do not drown what ``fc`` passes on - and cached like any
decoder layer; ``norm`` is a
copy of the target's final norm; ``enorm`` (EAGLE-3's input norm on the embedding, another copy of the
final norm) brings the embedding to the feature's scale - token embeddings are far smaller than
normed features (on SmolLM2 and in the toy tests), and without it the head learns to read the token
only slowly. Features here are the verifier's *final-normed* top-layer states
(what its LM head reads): their scale is the norm's, so a feature loss does not drown in the residual
stream's outlier dimensions (norms ~800, single dimensions to ~4400 on SmolLM2).

The draft LM head scores a reduced vocabulary (``vocab_ids``, the most frequent tokens of the
training answers - EAGLE-3's draft vocabulary), through :class:`~leap.core.modeling.draft_head.DraftHead`;
lossless regardless, since the verifier scores the full vocabulary.

Who calls what: :class:`leap.heads.drafter.Eagle` drafts with a head; :mod:`leap.heads.train` trains
one; :func:`save_head` / :func:`load_head` store it as safetensors with a JSON record of how it was made.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from leap.core.errors import SettingsError
from leap.core.modeling.hf_interface import call_layer
from leap.core.modeling.kv_cache import eager_attention
from leap.core.modeling.layers import causal_mask

__all__ = ["FeatureHead", "save_head", "load_head", "causal_mask"]


def _trainable(module: nn.Module) -> nn.Module:
    """``module`` with leap's packed oneDNN linears (:mod:`leap.core.modeling.fast_linear`, inference only:
    no gradient reaches a packed weight) replaced by plain ``nn.Linear`` copies of their weights."""
    from leap.core.modeling.fast_linear import OneDNNLinear

    for name, child in list(module.named_children()):
        if isinstance(child, OneDNNLinear):
            plain = nn.Linear(child.in_features, child.out_features, bias=child.bias is not None,
                              device=child.weight.device, dtype=child.weight.dtype)
            with torch.no_grad():
                plain.weight.copy_(child.weight)
                if child.bias is not None:
                    plain.bias.copy_(child.bias)
            setattr(module, name, plain)
        else:
            _trainable(child)
    return module


class FeatureHead(nn.Module):
    """``(f_t, e(x_{t+1})) -> f_hat_{t+1}`` (module docstring). Build with :meth:`from_model`."""

    def __init__(self, fc: nn.Linear, layer: nn.Module, norm: nn.Module, vocab_ids: torch.Tensor,
                 init_layer: int, embed_norm: nn.Module | None = None) -> None:
        super().__init__()
        self.fc, self.layer, self.norm = fc, layer, norm
        self.embed_norm = embed_norm if embed_norm is not None else copy.deepcopy(norm)
        self.register_buffer("vocab_ids", vocab_ids.to(torch.long))
        self.init_layer = int(init_layer)
        self.hidden_size = fc.out_features
        self.vocab_size = 0  # the target's vocabulary (set by from_model)

    @classmethod
    def from_model(cls, model: Any, *, init_layer: int = -1, vocab_ids: torch.Tensor | None = None) -> FeatureHead:
        """A head for ``model`` (a :class:`~leap.core.modeling.model.LeapModel`): ``fc = [I | I]`` (feature
        plus embedding), a copy of decoder layer ``init_layer`` and of the final norm; draft vocabulary
        ``vocab_ids`` (default: all tokens)."""
        layers = model.layers
        index = init_layer % len(layers)
        hidden = model.config.hidden_size
        fc = nn.Linear(2 * hidden, hidden, bias=True, device=model.device, dtype=model.dtype)
        with torch.no_grad():
            eye = torch.eye(hidden, device=model.device, dtype=model.dtype)
            fc.weight.copy_(torch.cat([eye, eye], dim=1))
            fc.bias.zero_()
        layer = _trainable(copy.deepcopy(layers[index]))
        layer.self_attn.layer_idx = 0  # its cache is the head's own one-layer cache
        with torch.no_grad():  # residual branches start at zero: the head starts as norm(fc(...)), and the
            for out in (getattr(layer.self_attn, "o_proj", None), getattr(getattr(layer, "mlp", None), "down_proj", None)):
                if isinstance(out, nn.Linear):  # copied layer's large top-layer outputs do not drown fc's
                    out.weight.zero_()
        ids = torch.arange(model.vocab_size) if vocab_ids is None else torch.as_tensor(vocab_ids).cpu()
        head = cls(fc, layer, copy.deepcopy(model.norm), ids.to(model.device), index)
        head.vocab_size = model.vocab_size
        # the host list the drafter's DraftHead takes: read once here, at load time (never in a step)
        head.vocab_list = list(range(model.vocab_size)) if vocab_ids is None else ids.tolist()
        return head

    def forward(self, features: torch.Tensor, embeds: torch.Tensor, position_embeddings, *,
                attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                cache=None) -> torch.Tensor:
        """``features``, ``embeds``: ``[B, q, H]``; with ``cache`` (a one-layer
        :class:`~leap.core.modeling.kv_cache.LeapKVCache`) the ``q`` rows extend it (drafting); without,
        a causal pass over whole sequences (training). Returns predicted features ``[B, q, H]``."""
        x = self.fc(torch.cat([features, self.embed_norm(embeds)], dim=-1))
        with eager_attention(x.device) if cache is not None else contextlib.nullcontext():  # a key length per step
            out = call_layer(self.layer, x, cache=cache, attention_mask=attention_mask, position_ids=position_ids,
                             position_embeddings=position_embeddings, leap_layerwise=cache is not None)
        return self.norm(out)


def save_head(head: FeatureHead, path: str | Path, record: dict[str, Any]) -> Path:
    """``path`` (safetensors, float32 weights) plus ``record`` (how it was made) in its metadata."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in head.state_dict().items()}
    meta = {"leap_head": json.dumps({**record, "init_layer": head.init_layer, "hidden_size": head.hidden_size,
                                     "vocab_size": head.vocab_size})}
    tmp = path.with_suffix(".tmp")
    save_file(state, str(tmp), metadata=meta)
    tmp.replace(path)
    return path


def head_record(path: str | Path) -> dict[str, Any]:
    """The JSON record stored with a head (model, data, training command, commit)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return json.loads((f.metadata() or {}).get("leap_head", "{}"))
    except Exception as err:  # noqa: BLE001 - safetensors' own error type, OSError, a torn JSON record
        raise _unreadable(path, err) from err


def read_state(path: str | Path) -> dict[str, torch.Tensor]:
    """A head file's tensors (on the host); a clear error when the file is truncated or not safetensors."""
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as err:  # noqa: BLE001
        raise _unreadable(path, err) from err


def _unreadable(path, err) -> SettingsError:
    return SettingsError(f"{path} is not a readable head file (truncated or not safetensors: "
                         f"{str(err).splitlines()[0] if str(err) else type(err).__name__}); train it again with "
                         "`leap train-head` or pass another head=PATH")


def load_head(model: Any, path: str | Path) -> FeatureHead:
    """The head stored at ``path``, built for ``model``; a clear error if it was trained for another model."""
    path = Path(path)
    if not path.is_file():
        raise SettingsError(f"no draft head at {path}; train one with `leap train-head --model ...` "
                            "or pass head=PATH")
    record = head_record(path)
    state = read_state(path)  # on the host; load_state_dict copies onto the model's device
    shape = (record.get("hidden_size"), record.get("vocab_size"))
    if shape != (model.config.hidden_size, model.vocab_size):
        raise SettingsError(f"the head at {path} was trained for {record.get('model', 'another model')} "
                            f"(hidden size, vocabulary {shape}), not {model.name} "
                            f"({model.config.hidden_size}, {model.vocab_size}); train one with "
                            f"`leap train-head --model {model.name}`")
    head = FeatureHead.from_model(model, init_layer=record.get("init_layer", -1), vocab_ids=state["vocab_ids"])
    head.load_state_dict({k: v.to(model.dtype) if v.is_floating_point() else v for k, v in state.items()})
    head.record = record
    return head.eval()
