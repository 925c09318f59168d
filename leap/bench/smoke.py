"""``leap smoke``: every path of the CLI on a model of real size with random weights, on any device.

Random weights say nothing about acceptance rates, but everything about crashes, memory, costs and
numerics: a model built from a config (presets ``tiny`` and ``llama3-8b``; any field can be
overridden) runs, on the device and dtype asked for,

* ``plain`` decoding (the reference of every identity check),
* ``fixed-config``: a layer-skip draft under a fixed configuration (the middle third skipped),
* ``leap``: LEAP's zone-aware MCTS search online (prefill trace, zones, groups, measured reward),
* ``drafter``: a model-free drafter (``suffix``) and the ``select`` drafter (calibrated costs),
* ``redundancy``: every registered metric on a prefill trace, zones and groups,
* ``env``: one episode of ``LeapLayerSearchCost-v0`` with random actions,
* ``batch``: :class:`~leap.core.decoding.batch.BatchDecoder` on four prompts of different lengths, plainly and
  with ``suffix`` drafting per row, each row held to decoding that prompt alone (``batch_rows_identical``),
* ``calibration``: the cost curves of :mod:`leap.core.decoding.calibrate`,

and reports, per path, ``ok`` or the error; greedy token identity against plain decoding (float32:
``identical`` must be true; bfloat16/float16: the identity rate and, where a path diverges, the
logit margin between the two best tokens at the first divergence - a near-tie that reduction order
can flip); tokens/s; the verification curve ``c(k)``; the one-token draft cost against the number of
skipped layers; and peak memory.

Who calls what: ``leap smoke`` (:func:`leap.cli.main`) calls :func:`run_smoke`; ``tests/bench/
test_smoke.py`` runs the ``tiny`` preset on the CPU; the GPU runs are in experiments/2026-11-26-gpu-notebook.
"""

from __future__ import annotations

import platform
import resource
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from leap.core.runtime.provenance import provenance
from leap.core.verify.divergence import first_divergence
from leap.core.runtime.device import synchronize, wall_clock
from leap.core.errors import SettingsError

__all__ = ["PRESETS", "build_random_model", "run_smoke", "SmokeSettings"]

PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024),
    # SmolLM2-135M's shape (the default model's config): 30 layers, hidden 576, GQA with 3 KV heads, vocab 49152
    "smollm2-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                         rope_theta=100000.0, rms_norm_eps=1e-5),
    # Llama-3-8B's shape (Meta's config.json): 32 layers, hidden 4096, GQA with 8 KV heads, vocab 128256
    "llama3-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                      rope_theta=500000.0, rms_norm_eps=1e-5),
}


@dataclass
class SmokeSettings:
    preset: str = "tiny"
    device: str = "cpu"
    dtype: str = "float32"
    overrides: dict[str, Any] | None = None
    prompt_tokens: int = 64
    max_new_tokens: int = 32
    budget: int = 12
    seed: int = 0
    paths: tuple[str, ...] = ("plain", "fixed-config", "leap", "drafter", "select", "redundancy", "env",
                              "batch", "calibration")
    batch_size: int = 4


def build_random_model(preset: str, device: str, dtype: torch.dtype, overrides: dict[str, Any] | None = None,
                       seed: int = 0):
    """A ``LlamaForCausalLM`` of the preset's shape with N(0, 0.02) weights, built on ``device`` directly
    (no float32 copy on the host: the 8B preset fits a 24 GiB machine in bfloat16)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from leap.core.modeling.model import wrap_model

    if preset not in PRESETS:
        raise SettingsError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    fields = {**PRESETS[preset], **(overrides or {})}
    config = LlamaConfig(**fields, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                         pad_token_id=None)
    config._attn_implementation = "sdpa"
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters are allocated in ``dtype`` by to_empty, never in float32
    try:
        with torch.device("meta"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    model = model.to_empty(device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02, generator=gen)
        # non-persistent buffers (rotary inv_freq) were left uninitialised by to_empty: rebuild them
        model.model.rotary_emb = type(model.model.rotary_emb)(config).to(device)
    model.generation_config.eos_token_id = None
    return wrap_model(model.eval(), None, name=f"random-{preset}")


def _peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    scale = 2**20 if platform.system() == "Darwin" else 2**10  # ru_maxrss: bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**30


def _batch_path(model, prompt: list[int], settings: SmokeSettings, report: dict[str, Any]) -> None:
    """Batched plain and ``suffix`` decoding of ``batch_size`` prompts of different lengths (prefixes of the smoke
    prompt), each row compared with plain decoding of that prompt alone; throughput in ``tokens_per_s``."""
    from leap.core.decoding.batch import BatchDecoder
    from leap.core.decoding.decoder import SelfSpecDecoder

    device = model.device
    n = max(2, int(settings.batch_size))
    lengths = [max(2, len(prompt) - i * max(1, len(prompt) // (2 * n))) for i in range(n)]
    prompts = [prompt[:k] for k in lengths]
    alone = [list(SelfSpecDecoder(model, None).generate(p, max_new_tokens=settings.max_new_tokens).token_ids)
             for p in prompts]
    identical: dict[str, list[bool]] = {}
    for label, drafter in (("batch-plain", None), ("batch-suffix", "suffix")):
        decoder = BatchDecoder(model, drafter)
        decoder.generate(prompts, max_new_tokens=4)  # warm-up
        start = wall_clock(device)
        outcome = decoder.generate(prompts, max_new_tokens=settings.max_new_tokens)
        seconds = wall_clock(device) - start
        report["tokens_per_s"][label] = outcome.new_tokens / seconds if seconds > 0 else 0.0
        identical[label] = [list(row.token_ids) == ref for row, ref in zip(outcome.rows, alone)]
    report["batch_size"] = n
    report["batch_rows_identical"] = identical


def run_smoke(settings: SmokeSettings, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Build the model, run every path, return the report (see the module docstring)."""
    from leap.core.decoding.calibrate import calibrate
    from leap.core.config import LayerConfig
    from leap.core.decoding.decoder import SelfSpecDecoder
    from leap.core.modeling.model import _pick_dtype

    say = progress or (lambda msg: None)
    device = torch.device(settings.device)
    dtype = _pick_dtype(settings.dtype, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    model = build_random_model(settings.preset, str(device), dtype, settings.overrides, settings.seed)
    synchronize(device)
    report: dict[str, Any] = {
        "preset": settings.preset, "device": str(device), "dtype": str(dtype).replace("torch.", ""),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else (platform.processor() or platform.machine()),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "layers": model.num_layers,
        "parameters_b": sum(p.numel() for p in model.hf_model.parameters()) / 1e9,
        "build_s": time.perf_counter() - t0, "paths": {}, "tokens_per_s": {}, "outputs_identical": {},
        "divergence": {}, "provenance": provenance(),
    }
    say(f"built {report['parameters_b']:.2f}B parameters in {report['build_s']:.1f} s")
    gen = torch.Generator().manual_seed(settings.seed)
    prompt = torch.randint(0, model.vocab_size, (settings.prompt_tokens,), generator=gen).tolist()
    prompt = prompt[: settings.prompt_tokens // 2] * 2  # a repeat, so model-free drafters find matches
    L = model.num_layers
    config = LayerConfig.from_sets(L, skip=range(L // 3, 2 * L // 3))
    costs = None
    outputs: dict[str, list[int]] = {}

    def timed_generate(name: str, fn: Callable[[], Any]) -> None:
        start = wall_clock(device)
        outcome = fn()
        seconds = wall_clock(device) - start
        gen_out = getattr(outcome, "generation", outcome)
        outputs[name] = list(gen_out.token_ids)
        report["tokens_per_s"][name] = len(gen_out.token_ids) / seconds if seconds > 0 else 0.0

    def plain():
        return SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=settings.max_new_tokens)

    def run_path(name: str) -> None:
        nonlocal costs
        if name == "plain":
            SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=4)  # warm-up
            timed_generate("plain", plain)
        elif name == "calibration":
            costs = calibrate(model, context=settings.prompt_tokens, repeats=3)
            report["verify_curve"] = {k: round(v, 4) for k, v in costs.verify_curve.items()}
            report["max_tree_nodes"] = costs.max_tree_nodes
            report["long_context"] = costs.long_context
            report["long_verify_curve"] = {k: round(v, 4) for k, v in costs.long_curve.items()}
            report["draft_cost"] = {L - n: round(v, 4) for n, v in sorted(costs.draft_curve.items(), reverse=True)}
            report["layer_cost"], report["head_cost"] = costs.layer_cost, costs.head_cost
            report["step_ms"] = costs.step_s * 1000
            report["drafter_overhead"] = costs.drafter_overhead
        elif name == "fixed-config":
            timed_generate(name, lambda: SelfSpecDecoder(model, config, costs=costs).generate(
                prompt, max_new_tokens=settings.max_new_tokens))
        elif name in ("drafter", "select"):
            drafter = "suffix" if name == "drafter" else "select"
            timed_generate(name, lambda: SelfSpecDecoder(model, None, drafter=drafter, costs=costs).generate(
                prompt, max_new_tokens=settings.max_new_tokens))
        elif name == "leap":
            from leap.search.factory import agent_factory
            from leap.search.runner import OnlineSearch, SearchSettings

            runner = OnlineSearch(SelfSpecDecoder(model, None, costs=costs),
                                  agent_factory("leap", L, seed=settings.seed),
                                  SearchSettings(budget=settings.budget, give_up=settings.budget, loss_budget=0.0))
            timed_generate(name, lambda: runner.generate(prompt, max_new_tokens=settings.max_new_tokens))
        elif name == "redundancy":
            from leap.core.modeling.trace import capture_trace
            from leap.redundancy.base import compute_metrics
            from leap.redundancy.build import build_space

            trace = capture_trace(model, prompt, positions=8)
            metrics = compute_metrics(trace)
            space = build_space(trace, metrics=None)
            report["zones"] = "".join(z.value[0].upper() for z in space.zones)
            report["metrics"] = sorted(metrics)
        elif name == "env":
            from leap.envs.layer_search import LeapLayerSearchEnv

            env = LeapLayerSearchEnv(model, prompts=[prompt], max_new_tokens=8, reward="cost", chat=False,
                                     calibration_prompts=1, seed=settings.seed)
            env.reset(seed=settings.seed)
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                done = terminated or truncated
        elif name == "batch":
            _batch_path(model, prompt, settings, report)
        else:
            raise SettingsError(f"unknown smoke path {name!r}")

    order = ["plain", "calibration", *[p for p in settings.paths if p not in ("plain", "calibration")]]
    for name in order:
        if name not in settings.paths and name != "plain":
            continue
        say(name)
        try:
            run_path(name)
            report["paths"][name] = "ok"
        except Exception as err:  # every path reports, none stops the smoke run  # noqa: BLE001
            report["paths"][name] = f"{type(err).__name__}: {err}"
            report.setdefault("tracebacks", {})[name] = traceback.format_exc(limit=6)

    reference = outputs.get("plain")
    for name, tokens in outputs.items():
        if name == "plain" or reference is None:
            continue
        same = tokens == reference
        report["outputs_identical"][name] = same
        if not same:
            try:
                report["divergence"][name] = first_divergence(model, prompt, reference, tokens)
            except Exception as err:  # noqa: BLE001
                report["divergence"][name] = {"error": str(err)}
    report["identical"] = bool(reference is not None and all(report["outputs_identical"].values())
                               and all(all(rows) for rows in report.get("batch_rows_identical", {}).values()))
    compared = [*report["outputs_identical"].values(),
                *(same for rows in report.get("batch_rows_identical", {}).values() for same in rows)]
    report["identity_rate"] = sum(compared) / len(compared) if compared else None  # generations identical
    report["peak_memory_gib"] = _peak_memory_gib(device)
    report["ok"] = all(v == "ok" for v in report["paths"].values())
    return report
