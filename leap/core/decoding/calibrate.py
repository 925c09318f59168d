"""Costs of the machine at hand: the verification curve c(k), draft costs per layer, drafter overheads.

Speculative decoding pays when ``committed tokens / step cost > 1``, and every part of the step cost
depends on the machine: a forward over k tokens costs ~1x one token on a memory-bound GPU and
1.2-1.5x on a small CPU; a decoder layer's share of a forward depends on its size against the LM head.
leap therefore measures them once per model/device/dtype/threads and caches the result; no
machine's numbers live in the code.

Measured (:func:`calibrate`), all relative to ``step_s``, one full forward over one token at the
calibration context length (what a plain decoding step costs):

* ``verify_curve[k]`` = c(k): a full forward over ``k`` tokens (verifying ``d`` draft tokens is a forward
  over ``d + 1``), at every k up to 16, then at 24, 32, 48, 64 for as long as the curve keeps paying
  (:func:`keeps_paying`: once an extra token costs a whole plain step, no extra draft node can raise the
  speed of a step that pays, so larger trees are never planned: :attr:`Calibration.max_tree_nodes`);
* ``long_curve[k]``: c(k) again at a longer context (``long_context``, 8x the first where the model
  allows), on a sparse grid, in plain steps at that context; :meth:`Calibration.verify` interpolates
  between the two contexts, so a tree planned at 2,000 tokens of context is not sized by costs at 128;
* ``draft_curve[n]``: a one-token draft forward that executes the first ``n`` layers (n = 1, L/4, L/2,
  3L/4, L) and the LM head; ``layer_cost``: one decoder-layer pass over one token, and ``head_cost``:
  what a one-token draft forward costs beyond its layer passes (embedding, final norm, LM head,
  leap's own overhead) - slope and intercept of a least-squares line through ``draft_curve``;
* ``drafter_overhead[name]``: a model-free drafter's own time per step (proposing and learning from
  the verifier), for every registered drafter that drafts without layers.

:meth:`Calibration.step_cost` combines them into the predicted cost of one draft/verify step, in
plain steps; its inverse times the committed tokens is the cost-model reward
(:class:`leap.search.reward.CostModelSpeedup`). The ``select`` drafter and the ``bandit`` draft
policy read the same numbers (their ``use_costs`` hooks).

Who calls what: ``leap calibrate`` prints :func:`calibrate`'s result; :func:`calibration_for` (cached
under ``$LEAP_CACHE/calibration``) is what the decoder, the search runner, the environments and
``leap smoke`` call on first use.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from leap.core.runtime.device import wall_clock
from leap.core.modeling.model import LeapModel
from leap.core.runtime.costs import DENSE_K, MAX_K, Calibration

__all__ = ["Calibration", "calibrate", "calibration_for", "batch_calibration_for", "batch_curves", "self_check",
           "calibration_key", "keeps_paying", "verify_grid", "MAX_K", "BATCH_TOKENS"]

#: tokens per row at which a batch size's curve is measured: chains of 0, 1, 2, 4, 8 and 16 draft tokens verified
BATCH_TOKENS = (1, 2, 3, 5, 9, 17)

#: bumped when what :func:`calibrate` measures changes, so cached calibrations of an older kind are measured again
CALIBRATION_SCHEMA = 2


def verify_grid(max_k: int) -> list[int]:
    """The k at which c(k) is measured: every k up to ``DENSE_K``, then 1.5x and 2x each power of two."""
    grid = list(range(2, min(max_k, DENSE_K) + 1))
    m = DENSE_K
    while m < max_k:
        grid += [k for k in (m + m // 2, 2 * m) if k <= max_k]
        m *= 2
    return grid


def keeps_paying(curve: dict[int, float]) -> bool:
    """Whether the measured curve's last stretch still costs less than one plain step per extra token.

    A draft node commits at most one token; once verifying one more token costs a whole plain step,
    adding nodes cannot raise ``(1 + accepted) / cost`` above 1 for any tree, so the curve is not
    measured further and trees are never planned beyond it."""
    ks = sorted(curve)
    if len(ks) < 2:
        return True
    k0, k1 = ks[-2], ks[-1]
    return (curve[k1] - curve[k0]) / (k1 - k0) < 1.0

def calibration_key(model: LeapModel) -> dict[str, Any]:
    """What the costs depend on: the model (name and architecture), device and the chip it is (CPU model
    or GPU name, so a shared ``$LEAP_CACHE`` never lends one machine's costs to another), dtype, threads,
    torch."""
    from leap.core.runtime.provenance import processor_name

    from leap.core.modeling.hf_interface import architecture_digest

    return {
        "model": model.name,
        "architecture": architecture_digest(model.config)[:12],
        "device": str(model.device),
        "processor": processor_name(model.device),
        "dtype": str(model.dtype).replace("torch.", ""),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "onednn_linears": int(model.info.get("onednn_linears", 0)),
        "schema": CALIBRATION_SCHEMA,
    }


def _median_time(fn: Callable[[], Any], repeats: int, device) -> float:
    times = []
    for _ in range(repeats):
        t0 = wall_clock(device)
        fn()
        times.append(wall_clock(device) - t0)
    return statistics.median(times)


def _interleaved(fn: Callable[[], Any], reference: Callable[[], Any], repeats: int, device,
                 steps: list[float]) -> float:
    """Median time of ``fn`` over the median time of ``reference`` (one plain step), the two timed
    alternately so that drift of a shared machine cancels in the ratio; reference times join ``steps``."""
    mine, ref = [], []
    for _ in range(repeats):
        for fn_, out in ((reference, ref), (fn, mine)):
            t0 = wall_clock(device)
            fn_()
            out.append(wall_clock(device) - t0)
    steps.extend(ref)
    return statistics.median(mine) / statistics.median(ref)


def _model_free_drafters() -> list[str]:
    from leap.core.drafters import drafters

    return [name for name in drafters.names()
            if not drafters.get(name).uses_layers and not drafters.get(name).needs_costs]


def _verification_curve(forward: Callable[..., Any], grid: Sequence[int], repeats: int, device,
                        step_times: list[float]) -> dict[int, float]:
    """c(k) over ``grid``; past ``DENSE_K`` only while :func:`keeps_paying`."""
    curve = {1: 1.0}
    plain = lambda: forward(1)  # noqa: E731
    for k in grid:
        if k > DENSE_K and not keeps_paying(curve):
            break
        curve[k] = _interleaved(lambda k=k: forward(k), plain, repeats, device, step_times)
    return curve


def calibrate(model: LeapModel, *, context: int = 128, repeats: int = 5, max_k: int = MAX_K,
              long_context: int | None = None, drafter_names: Sequence[str] | None = None, seed: int = 0,
              progress: Callable[[str], None] | None = None) -> Calibration:
    """Measure the costs of ``model`` on its device (see the module docstring).

    ``context`` tokens (random ids, fixed ``seed``) are prefilled first, so every forward attends to
    a realistic cache; each ratio is the median of ``repeats`` timed runs over the median of as many
    plain one-token steps timed alternately with them (so a shared machine's drift cancels), after a
    warm-up run. The curve is measured again at ``long_context`` (default ``8 * context``, capped by
    the model's context; ``0``: not measured) on a sparse grid.
    """
    from leap.core.modeling.layers import LayerStack

    stack = LayerStack(model)
    dev = model.device
    gen = torch.Generator().manual_seed(seed)
    if long_context is None:
        long_context = min(8 * context, model.max_context - max_k - 2)
    long_context = long_context if long_context > context else 0
    total = max(context, long_context) + max_k + 1
    ids = torch.randint(0, model.vocab_size, (total,), generator=gen).tolist()
    with torch.inference_mode():
        cache = stack.new_cache(total + 2)
        stack.run_layers(stack.embed(ids[:context]), stack.full_plan, cache, 0)
        at = [context]  # the context the forwards below attend to

        def forward(k: int, plan=None) -> torch.Tensor:
            hidden = stack.run_layers(stack.embed(ids[at[0]: at[0] + k]), plan or stack.full_plan, cache, at[0])
            logits = stack.logits(hidden[:, -1:])
            stack.rollback(cache, at[0])
            return logits

        for k in (1, max_k):  # warm-up: kernels, allocator, oneDNN primitives
            forward(k)
        step_times: list[float] = []
        plain = lambda: forward(1)  # noqa: E731
        curve = _verification_curve(forward, verify_grid(max_k), repeats, dev, step_times)
        if progress:
            progress("verification curve")

        L = stack.num_layers
        counts = sorted({1, max(1, L // 4), max(1, L // 2), max(1, 3 * L // 4), L})
        ratios = [_interleaved(lambda n=n: forward(1, tuple((i, 1) for i in range(n))), plain, repeats, dev,
                               step_times) for n in counts]
        step = statistics.median(step_times)
        slope, intercept = np.polyfit(np.array(counts, dtype=float), np.array(ratios), 1)
        layer_cost = max(float(slope), 0.0)
        head_cost = max(float(intercept), 0.0)
        if progress:
            progress("draft costs")
        logits = forward(2)[0].unsqueeze(0).expand(2, -1)
        long_curve: dict[int, float] = {}
        if long_context:  # the same forwards after ``long_context`` tokens, timed against plain steps there
            stack.run_layers(stack.embed(ids[context:long_context]), stack.full_plan, cache, context)
            at[0] = long_context
            forward(1), forward(max(curve))
            sparse = [k for k in sorted(curve) if k > 1 and (k & (k - 1) == 0 or k == max(curve))]
            long_curve = _verification_curve(forward, sparse, repeats, dev, [])
            if progress:
                progress(f"verification curve at context {long_context}")

    overhead: dict[str, float] = {}
    from leap.core.drafters import make_drafter

    history = ids[:context]
    for name in _model_free_drafters() if drafter_names is None else drafter_names:
        try:
            drafter = make_drafter(name)
            if drafter.needs_model:
                drafter.use_model(model)
        except Exception:  # a drafter that needs arguments or files (a trained head): not calibrated  # noqa: BLE001
            continue
        if drafter.needs_costs:  # e.g. gated's break-even threshold: the curve measured so far, no overheads
            drafter.use_costs(Calibration(calibration_key(model), step, curve, layer_cost, head_cost, {}, context,
                                          dict(zip(counts, ratios))))
        drafter.begin(history[: context // 2])
        if drafter.needs_features:  # the verifier's features of the context, as a session hands them over
            with torch.inference_mode():
                states = model.base(input_ids=torch.tensor([history], device=dev)).last_hidden_state[0]
            drafter.observe_features(0, states[: len(history) - 1])

        def run(d=drafter) -> None:
            d.propose_tree(history, 8)
            if d.needs_logits:
                d.observe(history[-2:], logits)
            d.feedback(0, 0)

        run()
        overhead[name] = _median_time(run, repeats, dev) / step
    if progress:
        progress("drafter overheads")
    draft_curve = dict(zip(counts, ratios))
    return Calibration(calibration_key(model), step, curve, layer_cost, head_cost, overhead, context, draft_curve,
                       long_curve, long_context if long_curve else 0)


def batch_curves(model: LeapModel, sizes: Sequence[int], *, context: int = 128, repeats: int = 5,
                 tokens: Sequence[int] = BATCH_TOKENS, seed: int = 0) -> dict[int, dict[int, float]]:
    """Issue 37's c(k) per batch size: for each of ``sizes`` (rows, > 1), a forward over that many rows of
    ``tokens`` tokens each (the batched verification of :class:`~leap.core.decoding.batch_session.BatchSession`, after
    ``context`` tokens per row), over a one-row one-token step timed alternately with it (as :func:`calibrate`'s
    curve): where each ratio climbs past the row count times the tokens' share, verification has turned
    compute-bound at that batch size."""
    from leap.core.decoding.batch_state import BatchState
    from leap.core.modeling.layers import LayerStack

    stack, dev = LayerStack(model), model.device
    gen = torch.Generator().manual_seed(seed)
    top = max(tokens)
    out: dict[int, dict[int, float]] = {}
    with torch.inference_mode():
        def state_for(rows: int):
            state = BatchState(stack, rows, context + top + 1)
            ids = torch.randint(0, model.vocab_size, (rows, context), generator=gen).to(dev)
            state.forward(ids, torch.arange(context, device=dev).repeat(rows, 1),
                          torch.ones(rows, context, dtype=torch.bool, device=dev))
            return state

        def forward(state, rows: int, q: int) -> None:
            start = state.slots
            ids = torch.randint(0, model.vocab_size, (rows, q), generator=gen).to(dev)
            pos = torch.arange(context, context + q, device=dev).repeat(rows, 1)
            stack.logits(state.forward(ids, pos, torch.ones(rows, q, dtype=torch.bool, device=dev)))
            state.keep(start, [0] * rows)

        one = state_for(1)
        plain = lambda: forward(one, 1, 1)  # noqa: E731
        plain()
        for rows in sorted({int(b) for b in sizes if int(b) > 1}):
            state = state_for(rows)
            forward(state, rows, top)  # warm-up at this shape
            out[rows] = {q: _interleaved(lambda q=q: forward(state, rows, q), plain, repeats, dev, [])
                         for q in sorted({int(q) for q in tokens})}
    return out


def batch_calibration_for(model: LeapModel, sizes: Sequence[int], **kwargs: Any) -> Calibration:
    """:func:`calibration_for`, with :func:`batch_curves` measured for the ``sizes`` it lacks (and kept in the
    same cache file): what :class:`~leap.core.decoding.batch.BatchDecoder` asks for when its bandit screens chain
    caps by the cost model, and ``leap calibrate --batch-sizes``."""
    bad = sorted({int(b) for b in sizes if int(b) < 1})
    if bad:
        from leap.core.errors import SettingsError

        raise SettingsError(f"batch sizes are row counts of at least 1; got {', '.join(map(str, bad))} "
                         "(e.g. --batch-sizes 2,4,8)")
    costs, kept = _calibration_and_kept(model, **kwargs)
    missing = sorted({int(b) for b in sizes if int(b) > 1} - set(costs.batch_curves))
    if not missing:
        return costs
    print(f"leap: measuring batched verification at {', '.join(map(str, missing))} rows (first use; "
          + ("cached)" if kept else "not cached: the calibration it extends was not)"), file=sys.stderr, flush=True)
    costs.batch_curves.update(batch_curves(model, missing, context=costs.context or 128))
    if kept:  # only the calibration that is in the cache file (one its self-check rejected never is)
        try:
            _cache_file(calibration_key(model)).write_text(json.dumps(costs.to_dict(), indent=1))
        except OSError:
            pass
    return costs


def _cache_file(key: dict[str, Any]) -> Path:
    root = Path(os.environ.get("LEAP_CACHE", Path.home() / ".cache" / "leap")) / "calibration"
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return root / f"{key['model'].replace('/', '_')}-{key['device'].replace(':', '')}-{key['dtype']}-{digest}.json"


#: below this a plain step is interpreter overhead, not the model: the self-check does not apply (a real model's
#: step on any CPU or GPU leap targets is well above it)
MIN_CHECKED_STEP_S = 0.01


def self_check(model: LeapModel, costs: Calibration, *, repeats: int = 5, tolerance: float = 0.5) -> list[str]:
    """What says a calibration was measured on a busy machine: a zero per-layer cost (a draft layer would look
    free), or a plain step timed again now that differs from the calibrated one by more than ``tolerance``
    (a repeated point). Empty when it looks sound. Not applied to steps under ``MIN_CHECKED_STEP_S`` (tiny test
    models: their steps are Python overhead, where a layer's share is legitimately ~0 and timing noise is
    relative to microseconds)."""
    from leap.core.modeling.layers import LayerStack

    if costs.step_s < MIN_CHECKED_STEP_S:
        return []
    problems = []
    if costs.layer_cost <= 0:
        problems.append("a layer pass measured as costing nothing")
    stack = LayerStack(model)
    ids = [1 + i % (model.vocab_size - 1) for i in range(min(costs.context, model.max_context - 2) + 1)]
    with torch.inference_mode():
        cache = stack.new_cache(len(ids) + 1)
        stack.run_layers(stack.embed(ids[:-1]), stack.full_plan, cache, 0)

        def step() -> None:
            stack.logits(stack.run_layers(stack.embed(ids[-1:]), stack.full_plan, cache, len(ids) - 1))
            stack.rollback(cache, len(ids) - 1)

        step()
        again = _median_time(step, repeats, model.device)
    if costs.step_s > 0 and abs(again - costs.step_s) > tolerance * costs.step_s:
        problems.append(f"a plain step timed again took {again * 1000:.1f} ms against the calibrated "
                        f"{costs.step_s * 1000:.1f} ms")
    return problems


def calibration_for(model: LeapModel, *, refresh: bool = False, cache: bool = True, **kwargs: Any) -> Calibration:
    """The cached calibration of ``model`` on this machine, measured (and cached) on first use.

    ``refresh=True`` measures again; ``cache=False`` neither reads nor writes the cache. Keyword
    arguments go to :func:`calibrate`. A calibration its :func:`self_check` rejects is returned for this
    process and never written, so the cached one (if any) stays.
    """
    return _calibration_and_kept(model, refresh=refresh, cache=cache, **kwargs)[0]


def _calibration_and_kept(model: LeapModel, *, refresh: bool = False, cache: bool = True,
                          **kwargs: Any) -> tuple[Calibration, bool]:
    """:func:`calibration_for`, and whether what it returns is what the cache file holds (read from it, or
    measured, accepted and written): only then may :func:`batch_calibration_for` write its additions there."""
    key = calibration_key(model)
    path = _cache_file(key)
    if cache and not refresh and path.is_file():
        try:
            data = json.loads(path.read_text())
            if data.get("key") == key:
                return Calibration.from_dict(data), True
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable: measure again
    if cache:
        print(f"leap: measuring this machine's costs for {key.get('model', 'the model')} on {key.get('device', '?')} "
              f"(first use; about a minute; cached at {path}; `leap calibrate --refresh` measures again)",
              file=sys.stderr, flush=True)
    kwargs.setdefault("progress", lambda part: print(f"leap: calibration: {part} measured", file=sys.stderr,
                                                     flush=True))
    result = calibrate(model, **kwargs)
    problems = self_check(model, result)
    if problems:  # measured under load: used for this process, never kept for good
        print("leap: calibration looks measured on a busy machine (" + "; ".join(problems) + "); using it now but "
              "not caching it - run `leap calibrate --refresh` on a quiet machine", file=sys.stderr, flush=True)
        return result, False
    if not cache:
        return result, False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result.to_dict(), indent=1))
    except OSError:
        return result, False  # a read-only home only costs a re-measurement
    return result, True
