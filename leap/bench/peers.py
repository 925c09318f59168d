"""Transformers' own ``generate`` as benchmark methods: the peers leap is compared with on the same weights.

``hf-ar`` (plain ``generate``, the peers' own baseline), ``hf-static`` (a static cache: on a GPU the fastest plain
decoding a user gets with one flag), ``hf-pld`` (prompt lookup decoding) and ``hf-early-exit`` (early-exit
self-speculation), each one ``generate`` call timed by the harness's wall clock like every leap method.

Who calls what: :data:`leap.bench.methods.bench_methods` imports this module on its first lookup and
:func:`leap.bench.methods.make_method` makes them by name.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from leap.bench.methods import BenchMethod, BenchOptions, MethodResult, bench_methods
from leap.core.errors import SettingsError
from leap.core.modeling.fast_linear import stock_linears
from leap.core.modeling.model import LeapModel

__all__ = ["TransformersPeer"]


class TransformersPeer(BenchMethod):
    """``model.generate`` of transformers with one assisted-generation option, on leap's weights. Verification
    forwards are counted with a hook on the last decoder layer (an early-exit draft never reaches it): M = new
    tokens / verification steps."""

    def __init__(self, name: str, model: LeapModel, *, stock: bool = False, count_steps: bool = True,
                 **generate_kwargs: Any) -> None:  # count_steps=False: one forward a token (a hook breaks compiling)
        self.name, self.model, self.generate_kwargs, self.stock = name, model, generate_kwargs, stock
        self.count_steps = count_steps
        self.warms_up_at_run_length = generate_kwargs.get("cache_implementation") == "static"

    def run(self, ids, *, max_new_tokens, temperature, seed):
        hf, calls = self.model.hf_model, [0]
        hook = self.model.layers[-1].register_forward_hook(lambda *a: calls.__setitem__(0, calls[0] + 1)) \
            if self.count_steps else None
        sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else \
            dict(do_sample=False)
        linears = stock_linears(hf) if self.stock else contextlib.nullcontext()
        try:
            torch.manual_seed(seed)
            with torch.inference_mode(), linears:
                out = hf.generate(torch.tensor([ids], device=self.model.device), max_new_tokens=max_new_tokens,
                                  eos_token_id=sorted(self.model.eos_token_ids) or None, pad_token_id=0,
                                  **sampling, **self.generate_kwargs)
        finally:
            hook is not None and hook.remove()
        new = out[0, len(ids):].tolist()
        steps = max(1, calls[0] - 1) if self.count_steps else max(1, len(new))  # the first call is the prefill
        settings = {**self.generate_kwargs, **({"linears": "stock"} if self.stock else {})}
        return MethodResult(new, steps, None, ", ".join(f"{k}={v}" for k, v in settings.items()))


@bench_methods.register("hf-pld")
def _hf_pld(model: LeapModel, options: BenchOptions, num_tokens: int = 10, max_matching_ngram_size: int = 2
            ) -> BenchMethod:
    """peer: transformers' prompt lookup decoding (prompt_lookup_num_tokens)"""
    return TransformersPeer("hf-pld", model, prompt_lookup_num_tokens=int(num_tokens),
                            max_matching_ngram_size=int(max_matching_ngram_size))


@bench_methods.register("hf-ar")
def _hf_ar(model: LeapModel, options: BenchOptions, linears: str = "leap") -> BenchMethod:
    """peer baseline: transformers' plain greedy/sampled model.generate (the peers' own plain decoding);
    linears=stock runs it on plain nn.Linear layers, the model as transformers itself builds it"""
    if linears not in ("leap", "stock"):
        raise SettingsError(f"hf-ar: linears must be leap (leap's oneDNN linears, the same weights and kernels as "
                            f"every leap method) or stock (nn.Linear, as transformers builds the model), got {linears!r}")
    return TransformersPeer("hf-ar", model, stock=linears == "stock")


@bench_methods.register("hf-static")
def _hf_static(model: LeapModel, options: BenchOptions) -> BenchMethod:
    """peer baseline: model.generate with cache_implementation="static" (on CUDA compiled, replayed as CUDA graphs):
    the fastest plain decoding a GPU user gets with one flag (leap report --baseline hf-static)"""
    return TransformersPeer("hf-static", model, count_steps=False, cache_implementation="static")


@bench_methods.register("hf-early-exit")
def _hf_early_exit(model: LeapModel, options: BenchOptions, layer: int | None = None,
                   num_assistant_tokens: int | None = None) -> BenchMethod:
    """peer: transformers' early-exit self-speculation (assistant_early_exit, default: half the layers)"""
    layer = model.num_layers // 2 if layer is None else int(layer)
    if not 1 <= layer < model.num_layers:
        raise SettingsError(f"hf-early-exit: layer must be in 1..{model.num_layers - 1}, got {layer}")
    more = {} if num_assistant_tokens is None else {"num_assistant_tokens": int(num_assistant_tokens)}
    return TransformersPeer("hf-early-exit", model, assistant_early_exit=layer, **more)
