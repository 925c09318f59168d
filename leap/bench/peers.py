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

#: ``generate`` options that take one sequence (transformers' assisted generation): such a peer decodes one request at
#: a time
ONE_SEQUENCE = ("prompt_lookup_num_tokens", "assistant_early_exit")


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
        new, steps = self._generate([ids], max_new_tokens, temperature, seed)
        return MethodResult(new[0], steps, None, self._settings())

    def run_batch(self, batch, *, max_new_tokens, temperature, seed):
        """One ``generate`` over the batch, left-padded under an attention mask (``leap bench --batch-size B``): at
        B > 1 on a GPU, ``hf-static`` is the fastest plain batched decoding a user gets with one flag. Each row's
        tokens end at its first EOS, as leap's batched rows do. Transformers' assisted generation (``hf-pld``,
        ``hf-early-exit``) takes one sequence: those refuse, as the base does."""
        if any(key in self.generate_kwargs for key in ONE_SEQUENCE):
            return super().run_batch(batch, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        rows, steps = self._generate(batch, max_new_tokens, temperature, seed)
        return MethodResult([t for row in rows for t in row], steps, None, self._settings(),
                            {"row_token_ids": rows, "row_new_tokens": [len(row) for row in rows]})

    def _generate(self, batch: list[list[int]], max_new_tokens: int, temperature: float,
                  seed: int) -> tuple[list[list[int]], int]:
        """``model.generate`` over ``batch`` (left-padded with token 0 under an attention mask): each row's new tokens
        up to and with its first EOS, and the decoding steps (the hooked verification forwards, or the longest row)."""
        hf, calls, device = self.model.hf_model, [0], self.model.device
        hook = self.model.layers[-1].register_forward_hook(lambda *a: calls.__setitem__(0, calls[0] + 1)) \
            if self.count_steps else None
        sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else \
            dict(do_sample=False)
        linears = stock_linears(hf) if self.stock else contextlib.nullcontext()
        width = max(len(ids) for ids in batch)
        padded = torch.tensor([[0] * (width - len(ids)) + list(ids) for ids in batch], device=device)
        # the mask is explicit: left to itself, generate would mask every token 0 in a prompt as padding
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch], device=device)
        try:
            torch.manual_seed(seed)
            with torch.inference_mode(), linears:
                out = hf.generate(padded, max_new_tokens=max_new_tokens, eos_token_id=sorted(self.model.eos_token_ids)
                                  or None, pad_token_id=0, attention_mask=mask, **sampling, **self.generate_kwargs)
        finally:
            hook is not None and hook.remove()
        eos, rows = self.model.eos_token_ids, []
        for row in out[:, width:].tolist():
            end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
            rows.append(row[:end])
        longest = max(len(row) for row in rows)
        steps = max(1, calls[0] - 1) if self.count_steps else max(1, longest)  # the first call is the prefill
        return rows, steps

    def _settings(self) -> str:
        settings = {**self.generate_kwargs, **({"linears": "stock"} if self.stock else {})}
        return ", ".join(f"{k}={v}" for k, v in settings.items())


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
