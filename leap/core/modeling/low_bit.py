"""The model's own weights at low precision, as a draft model with a KV cache of its own.

A low-bit self-draft (QSpec; ML-SpecQD; SpecMQuant) runs the *same* layers as the verifier with
cheaper weights, so its next-token distribution stays close to the target's - at T = 1 too, where
model-free drafts fail. Two runners, one interface (:class:`LowBitRunner`):

* :class:`LlamaCppRunner` - a GGUF file (the default model ships as Q4_1) run by llama.cpp through
  its Python binding ``llama-cpp-python`` (``pip install leap[lowbit]``; built from source on
  machines without a matching wheel). CPU and, with a CUDA build of llama.cpp, GPU.
* :class:`TorchInt8Runner` - any model leap can load (a Hugging Face folder, a config, the tiny test
  models): a copy with weight-int8 dynamic quantisation of every linear layer
  (``torch.ao.quantization.quantize_dynamic``: fbgemm/oneDNN int8 GEMMs on x86 CPUs), run by
  transformers' forward with a ``DynamicCache``. Needs no extra package; what it saves depends on the
  CPU's int8 kernels (measured, never assumed: ``leap calibrate`` times it).

A runner holds the tokens it has cached; :meth:`LowBitRunner.sync` keeps that in step with the
decoder's committed tokens (the longest common prefix is kept, rejected draft tokens are removed,
new committed ones are fed) and returns the logits after the last one. Who calls what: the
``lowbit`` drafter (:mod:`leap.core.drafters.lowbit`) builds one per model with :func:`make_runner`.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from leap.core.errors import SettingsError
from leap.core.modeling.hf_interface import cache_keyword, dynamic_cache, output_cache
from leap.core.modeling.fast_linear import unpack_linears
from leap.core.modeling.llama_cpp.handoff import hand_off
from leap.core.modeling.llama_cpp import contexts
from leap.core.modeling.llama_cpp.library import QUANTS, _silence, model_params, requantized
from leap.core.runtime.host_reads import on_host
from leap.core.runtime.notices import say_once

__all__ = ["LowBitRunner", "LlamaCppRunner", "TorchInt8Runner", "make_runner", "make_row_runners", "gguf_of", "requantized", "RUNNERS",
           "QUANTS"]


class LowBitRunner:
    """Feed tokens, read next-token logits; the cache holds :attr:`cached` (a prefix of the context)."""

    name = "base"
    #: the most tokens the runner's cache holds (None: no limit); a drafter keeps its context within it
    n_ctx: int | None = None

    def __init__(self) -> None:
        self.cached: list[int] = []

    # ------------------------------------------------------------------ what a runner implements
    def _feed(self, tokens: Sequence[int]) -> torch.Tensor:
        """Append ``tokens`` to the cache; the float32 logits ``[V]`` after the last one."""
        raise NotImplementedError

    def _truncate(self, n: int) -> None:
        """Keep the first ``n`` cached tokens."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def feed(self, tokens: Sequence[int]) -> torch.Tensor:
        logits = on_host(self._feed(tokens))  # runners run on the CPU: reading their logits is no device sync
        self.cached.extend(int(t) for t in tokens)
        return logits

    def feed_all(self, tokens: Sequence[int]) -> torch.Tensor:
        """:meth:`feed` that returns the logits after *each* token, ``[len(tokens), V]``: how the draft checks a cheaper
        draft's guesses (``lowbit``'s ``pre``). This base feeds one token at a time; the runners do it in one pass."""
        return torch.stack([self.feed([t]) for t in tokens])

    def truncate(self, n: int) -> None:
        if n < len(self.cached):
            self._truncate(n)
            del self.cached[n:]

    def _keep_common(self, tokens: Sequence[int]) -> list[int]:
        """Truncate the cache to its longest common prefix with ``tokens`` (never all of them: the last token is
        always fed, its logits are needed); the tokens still to feed."""
        common = 0
        limit = min(len(self.cached), len(tokens) - 1)
        while common < limit and self.cached[common] == tokens[common]:
            common += 1
        self.truncate(common)
        return list(tokens[common:])

    def sync(self, tokens: Sequence[int]) -> torch.Tensor:
        """Bring the cache to ``tokens`` (keeping the longest common prefix); logits after ``tokens[-1]``."""
        return self.feed(self._keep_common(tokens))

    # ------------------------------------------------------------------ several rows of a batch (issue 37)
    @classmethod
    def feed_rows(cls, runners: Sequence[LowBitRunner], tokens: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """:meth:`feed` of each runner its tokens; runners that share one model context override this to run
        them in one pass (:meth:`LlamaCppRunner.feed_rows`)."""
        return [r.feed(t) for r, t in zip(runners, tokens)]

    @staticmethod
    def sync_rows(runners: Sequence[LowBitRunner], contexts: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """:meth:`sync` of each runner to its context, the feeding done together (:meth:`feed_rows`)."""
        rest = [r._keep_common(c) for r, c in zip(runners, contexts)]
        return type(runners[0]).feed_rows(runners, rest)

    def reset(self) -> None:
        self.truncate(0)

    def take_kv(self, tokens: Sequence[int], kv: Any) -> bool:
        """Hold ``tokens`` with the target's keys and values of them (a :class:`~leap.core.modeling.kv_cache.PromptKV`)
        instead of computing its own: the KV handoff (issue 35). False where a runner cannot: it then holds nothing
        and its caller feeds the tokens (this base: never; :class:`LlamaCppRunner` can)."""
        return False


class TorchInt8Runner(LowBitRunner):
    """A weight-int8 copy of the model (dynamic quantisation of every ``nn.Linear``), transformers' forward."""

    name = "torch-int8"

    def __init__(self, model: Any) -> None:
        super().__init__()
        if model.device.type != "cpu":
            raise SettingsError("the torch-int8 low-bit runner is a CPU runner (torch's dynamic quantisation); "
                                "on a GPU use a GGUF with a CUDA build of llama.cpp (gguf=PATH)")
        self.n_ctx = int(model.max_context)
        hf = copy.deepcopy(model.hf_model).float().eval()
        # torch's own linears first: quantize_dynamic replaces nn.Linear only, so a model loaded with leap's packed
        # oneDNN linears was copied unquantised - a float32 draft under this runner's name (until 2026-11-26)
        unpack_linears(hf)
        self.module = torch.ao.quantization.quantize_dynamic(hf, {torch.nn.Linear}, dtype=torch.qint8)
        self._cache_type = dynamic_cache()
        self.cache = self._cache_type()

    def _forward(self, tokens: Sequence[int], keep: int) -> torch.Tensor:
        """``tokens`` through the int8 copy, appended to its cache; the float32 logits of the last ``keep`` (0: all)."""
        ids = torch.tensor([list(tokens)], dtype=torch.long)
        with torch.inference_mode():
            out = self.module(input_ids=ids, use_cache=True, logits_to_keep=keep, **{cache_keyword(self.module): self.cache})
        self.cache = output_cache(out)
        return out.logits[0].float()

    def _feed(self, tokens: Sequence[int]) -> torch.Tensor:
        return self._forward(tokens, 1)[-1]

    def take_kv(self, tokens: Sequence[int], kv: Any) -> bool:
        """The target's keys and values as this copy's ``DynamicCache`` (same layout: both are transformers')."""
        n = len(tokens)
        if kv.num_layers != len(self.module.model.layers) or kv.device.type != "cpu":
            return False
        cache = self._cache_type()
        for i in range(kv.num_layers):
            keys, values = kv.layer(i)
            cache.update(keys[None, :, :n].clone(), values[None, :, :n].clone(), i)
        self.cache, self.cached = cache, [int(t) for t in tokens]
        return True

    def feed_all(self, tokens: Sequence[int]) -> torch.Tensor:
        logits = on_host(self._forward(tokens, 0))
        self.cached.extend(int(t) for t in tokens)
        return logits

    def _truncate(self, n: int) -> None:
        if n == 0:
            self.cache = self._cache_type()
        else:
            self.cache.crop(n - len(self.cached))  # transformers 5: a negative count removes that many


class LlamaCppRunner(LowBitRunner):
    """A GGUF file run by llama.cpp (``llama-cpp-python``'s C API: batch decode, logits, KV removal)."""

    name = "llama.cpp"

    def __init__(self, path: str | Path, *, n_ctx: int = 8192, threads: int | None = None,
                 n_ubatch: int = 512, seqs: int = 1) -> None:
        super().__init__()
        try:
            import llama_cpp
        except ImportError as err:
            raise SettingsError(
                "the llama.cpp low-bit runner needs llama-cpp-python: `pip install leap[lowbit]` (builds "
                "llama.cpp from source where no wheel fits, ~10 minutes on 2 cores), or use backend=torch-int8"
            ) from err
        self._lib = llama_cpp
        _silence(llama_cpp)
        llama_cpp.llama_backend_init()
        key = str(Path(path).resolve())
        if key not in _MODELS:  # the weights are loaded once per process; each runner has its own context
            model = llama_cpp.llama_model_load_from_file(key.encode(), model_params(llama_cpp))
            if not model:
                raise SettingsError(f"llama.cpp could not load {path}")
            _MODELS[key] = model
        self._model = _MODELS[key]
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx * seqs  # seqs > 1: one sequence per batch row, n_ctx each (not unified)
        cparams.n_batch = n_ctx * seqs
        cparams.n_seq_max = seqs
        cparams.n_ubatch = min(n_ctx, int(n_ubatch))  # llama.cpp's micro-batch: how many prompt tokens per pass
        threads = threads or torch.get_num_threads() or os.cpu_count() or 1
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        self._key = (key, n_ctx, seqs, cparams.n_ubatch, threads)  # the settings a reused context must share
        reused = contexts.take(llama_cpp, self._key)  # a dropped runner's context, emptied (contexts.py)
        if reused is None:
            ctx = llama_cpp.llama_init_from_model(self._model, cparams)
            if not ctx:
                raise SettingsError(f"llama.cpp could not create a context for {path}")
            reused = ctx, llama_cpp.llama_batch_init(n_ctx * seqs, 0, 1)
        self._ctx, self._batch = reused
        self._vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self._model))
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self.n_ctx = n_ctx
        self._batch_tokens = n_ctx * seqs  # the most tokens one pass takes
        self.seq = 0  # this runner's sequence in the context
        self.path, self._seqs = key, seqs
        self._owner: LlamaCppRunner | None = None  # the runner that made the context (rows share it)

    @classmethod
    def rows(cls, path: str | Path, n: int, *, n_ctx: int = 4096, threads: int | None = None) -> list[LlamaCppRunner]:
        """``n`` runners on one llama.cpp context, one sequence each (``n_ctx`` tokens per sequence): the rows of a
        batch (:mod:`leap.core.decoding.batch`), fed together by :meth:`feed_rows` - one pass over the weights
        drafts a token for every row."""
        first = cls(path, n_ctx=n_ctx, threads=threads, seqs=n)
        out = [first]
        for seq in range(1, n):
            row = copy.copy(first)
            row.cached, row.seq, row._owner = [], seq, first
            out.append(row)
        return out

    @staticmethod
    def _decode(runners: Sequence[LlamaCppRunner], tokens: Sequence[Sequence[int]], every: bool = False) -> list[torch.Tensor]:
        """One ``llama_decode`` of each runner's ``tokens`` after its cached ones, in its own sequence (all runners
        on one context); the logits after each runner's last token (``every``: after each of its tokens,
        ``[len, V]``). Does not touch :attr:`cached`."""
        first = runners[0]
        lib, batch, ctx, i, last = first._lib, first._batch, first._ctx, 0, []
        for r, toks in zip(runners, tokens):
            start = len(r.cached)
            if start + len(toks) > r.n_ctx:
                raise SettingsError(f"the low-bit draft's context ({r.n_ctx} tokens) is full; pass n_ctx=N")
            for j, token in enumerate(toks):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = int(token), start + j, 1
                batch.seq_id[i][0] = r.seq
                batch.logits[i] = every or j == len(toks) - 1
                i += 1
            last.append(i - 1)
        batch.n_tokens = i
        if lib.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed in the low-bit draft")
        if every:  # one runner: its rows are the context's outputs, in order
            return [torch.from_numpy(np.ctypeslib.as_array(lib.llama_get_logits(ctx), shape=(i, first._vocab)).copy())]
        return [torch.from_numpy(np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx, k), shape=(first._vocab,)).copy())
                for k in last]

    def feed_all(self, tokens: Sequence[int]) -> torch.Tensor:
        logits = on_host(self._decode([self], [tokens], every=True)[0])
        self.cached.extend(int(t) for t in tokens)
        return logits

    @classmethod
    def feed_rows(cls, runners, tokens):
        ctx = runners[0]._ctx
        total = sum(len(t) for t in tokens)
        if len(runners) < 2 or any(r._ctx is not ctx for r in runners) or total > runners[0]._batch_tokens:
            return super().feed_rows(runners, tokens)
        out = [on_host(logits) for logits in cls._decode(runners, tokens)]
        for r, toks in zip(runners, tokens):
            r.cached.extend(int(t) for t in toks)
        return out

    def _feed(self, tokens: Sequence[int]) -> torch.Tensor:
        return self._decode([self], [tokens])[0]

    def _truncate(self, n: int) -> None:
        self._lib.llama_memory_seq_rm(self._mem, self.seq, n, -1)

    def take_kv(self, tokens: Sequence[int], kv: Any) -> bool:
        """The target's keys and values written into this runner's sequence (:mod:`leap.core.modeling.llama_cpp.handoff`:
        a copy, no forward pass; checked against llama.cpp's own on first use)."""
        why = hand_off(self, [int(t) for t in tokens], kv)
        if why is not None:
            self._truncate(0)
            self.cached = []
            _say_once(f"leap: the low-bit draft takes prompts in itself (no KV handoff): {why}")
            return False
        self.cached = [int(t) for t in tokens]
        return True

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        state = self.__dict__  # a constructor that failed set only part of it
        if "_batch" not in state or state.get("_owner") is not None:  # nothing to free, or a row of another
            return  # runner's context (that runner frees it)
        try:
            contexts.give(self._lib, self._key, self._ctx, self._batch)  # kept for the next runner, or freed
        except Exception:  # noqa: BLE001
            pass


RUNNERS = ("auto", "llama.cpp", "torch-int8")


def gguf_of(model: Any) -> Path | None:
    """The GGUF file ``model`` was loaded from, if any."""
    info = getattr(model, "info", {}) or {}
    if info.get("gguf_file") and info.get("source"):
        path = Path(info["source"]) / info["gguf_file"]
        return path if path.is_file() else None
    return None


def make_row_runners(model: Any, n: int, **runner_args: Any) -> list[LowBitRunner]:
    """Runners for the ``n`` rows of a batch: on llama.cpp, one context with a sequence per row
    (:meth:`LlamaCppRunner.rows`, ``n_ctx`` per row: 4096 unless given); otherwise one :func:`make_runner` each."""
    first = make_runner(model, **{**runner_args, "n_ctx": runner_args.get("n_ctx") or 64})  # which backend: cheap
    if n < 2 or not isinstance(first, LlamaCppRunner):
        return [first, *(make_runner(model, **runner_args) for _ in range(n - 1))]
    path = requantized(Path(runner_args["gguf"]) if runner_args.get("gguf") else gguf_of(model),
                       runner_args.get("quant", "native"))
    return LlamaCppRunner.rows(path, n, n_ctx=int(runner_args.get("n_ctx") or 4096), threads=runner_args.get("threads"))


def runner_unavailable(model: Any, backend: str = "auto", gguf: str | None = None) -> str | None:
    """Why no low-bit runner can draft for ``model`` with these settings, or None. Cheap (no runner is made): what
    :meth:`LowBit.unavailable <leap.core.drafters.lowbit.LowBit.unavailable>` says, so that a drafter search on a
    GPU leaves ``lowbit`` out with this reason instead of failing every request (seen on an H200: the int8 runner
    is CPU-only, and llama.cpp needs the model's GGUF). :func:`make_runner` raises the same reason."""
    if model.device.type == "cpu" or backend == "llama.cpp":
        return None  # the CPU always has the int8 runner; an explicit llama.cpp fails with its own message
    if backend == "torch-int8":
        return ("the torch-int8 low-bit runner is a CPU runner (torch's dynamic quantisation) and the model is on "
                f"{model.device}; use backend=llama.cpp with the model's GGUF (gguf=PATH)")
    if importlib.util.find_spec("llama_cpp") is None:
        return (f"the model is on {model.device}, where lowbit drafts with llama.cpp only, and llama-cpp-python "
                "is not installed (fix: bash setup.sh, or see `leap doctor`)")
    if not (Path(gguf).is_file() if gguf else gguf_of(model) is not None):
        return (f"the model is on {model.device}, where lowbit drafts with llama.cpp only, and no GGUF of the model "
                "is known (fix: --drafter-arg gguf=PATH, or load the model from a .gguf)")
    return None


def make_runner(model: Any, backend: str = "auto", gguf: str | None = None, threads: int | None = None,
                n_ctx: int = 0, quant: str = "native") -> LowBitRunner:
    """``auto``: llama.cpp on the model's GGUF (or ``gguf``) when llama-cpp-python is installed and the
    model runs on the CPU, else the torch int8 copy. ``n_ctx`` (llama.cpp's context; 0: the model's own,
    ``model.max_context``) bounds what the draft holds: past it the drafter drafts from the context's tail.
    ``quant`` re-encodes the GGUF for llama.cpp (:func:`requantized`; ``native``: as shipped)."""
    if quant not in QUANTS:
        raise SettingsError(f"unknown low-bit format {quant!r}; choose one of {', '.join(QUANTS)}")
    n_ctx = int(n_ctx) or int(getattr(model, "max_context", 0) or 8192)
    if backend not in RUNNERS:
        raise SettingsError(f"unknown low-bit backend {backend!r}; choose one of {', '.join(RUNNERS)}")
    path = Path(gguf) if gguf else gguf_of(model)
    if gguf and not path.is_file():
        raise SettingsError(f"no GGUF file at {gguf}")
    why = runner_unavailable(model, backend, gguf)
    if why:
        raise SettingsError(f"lowbit: {why}")
    if backend == "auto":
        installed = importlib.util.find_spec("llama_cpp") is not None
        usable = path is not None and installed
        backend = "llama.cpp" if usable else "torch-int8"  # off the CPU, runner_unavailable made sure llama.cpp is
        if backend == "torch-int8" and model.device.type == "cpu":
            why = ("llama-cpp-python is not installed (fix: bash setup.sh, or see `leap doctor`)" if not installed
                   else "the model was not loaded from a GGUF file (fix: --drafter-arg gguf=PATH)")
            _say_once(f"leap: lowbit drafts with the torch int8 runner, slower than plain decoding on this CPU: {why}")
    if backend == "llama.cpp":
        if path is None:
            raise SettingsError("the llama.cpp backend needs a GGUF of the model: load the model from a .gguf or "
                                "pass gguf=PATH (llama.cpp's convert_hf_to_gguf.py writes one)")
        return LlamaCppRunner(requantized(path, quant, threads), n_ctx=n_ctx, threads=threads)
    return TorchInt8Runner(model)


_SAID: set[str] = set()


def _say_once(text: str) -> None:
    """A fallback the user must hear about (stderr, once per process): a slower runner is never silent."""
    say_once(text, _SAID)


#: llama.cpp model handles by GGUF file: the weights are loaded once per process and shared, while every
#: runner (one per drafter) has a context - a KV cache - of its own (a dropped runner's is emptied and handed to the
#: next one: llama_cpp/contexts.py), so no drafter (no bench method) ever
#: starts from another's cached prompt: a shared cache would hand the second method of a prompt a free
#: prefill of it.
_MODELS: dict[str, Any] = {}
