"""leap from Python in two calls: :func:`generate` (plain decoding, a fixed drafter or a fixed layer configuration)
and :func:`generate_with_search` (the search over drafters and layers that ``leap generate`` runs by default).

    import leap

    model = leap.load_model("smollm2")                      # or a .gguf file, or a Hugging Face folder
    out = leap.generate(model, "Explain speculative decoding.", drafter="lowbit", max_new_tokens=64)
    print(out.text, out.mean_committed, out.wall_time_s)
    found = leap.generate_with_search(model, "Explain speculative decoding.", max_new_tokens=64)
    print(found.fixed_config, found.generation.text)

Both take a loaded :class:`~leap.core.modeling.model.LeapModel` or a model name/path (loaded with its defaults).
Everything else - agents, metrics, drafters, the Gymnasium environments, the benchmark harness - is in the packages
(``leap.core``, ``leap.search``, ``leap.redundancy``, ``leap.envs``, ``leap.bench``).

Who calls what: users; the CLI builds the same objects from its flags (:mod:`leap.cli.generate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["generate", "generate_with_search"]


def _model(model: Any):
    if isinstance(model, str):
        from leap.core import load_model

        return load_model(model)
    return model


def generate(model: Any, prompt: str | Sequence[int], *, drafter: str | None = None, config: Any = None,
             max_new_tokens: int = 128, temperature: float = 0.0, seed: int = 0, chat: bool = True,
             **decoder_kwargs: Any):
    """Decode ``prompt`` plainly, with ``drafter`` (a registered name: ``leap drafters`` lists them; arguments as
    ``drafter_kwargs=``), or with a layer configuration ``config`` (a :class:`~leap.core.config.LayerConfig` or its
    compact form, ``"EEESS..."``). Returns the :class:`~leap.core.decoding.outcome.GenerationOutcome`."""
    from leap.core import LayerConfig, SelfSpecDecoder

    model = _model(model)
    if isinstance(config, str):
        config = LayerConfig.parse(config)
    decoder = SelfSpecDecoder(model, config, drafter=drafter, **decoder_kwargs)
    return decoder.generate(prompt, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, chat=chat)


def generate_with_search(model: Any, prompt: str | Sequence[int], *, agent: str = "leap",
                         drafters: Sequence[str] | str | None = "default", memory: bool = True,
                         max_new_tokens: int = 128, temperature: float = 0.0, seed: int = 0, chat: bool = True,
                         steps_per_trial: int = 4, **settings: Any):
    """The online search ``leap generate`` runs by default: ``agent`` (LEAP's zone-aware MCTS; ``leap agents`` lists
    the others) over the ``drafters`` (``"default"``: leap's default options; None: the layers alone, the paper's
    LEAP) and the layers, each trial ``steps_per_trial`` real draft/verify steps rewarded by their measured speedup,
    with the memory of earlier requests under ``$LEAP_CACHE`` unless ``memory=False``. ``settings`` go to
    :class:`~leap.search.runner.SearchSettings` (``budget``, ``reward``, ``loss_budget``, ...). Returns the
    :class:`~leap.search.runner.SearchOutcome` (``.generation`` is the generation)."""
    from leap.core import SelfSpecDecoder
    from leap.search.drafter_space import DEFAULT_DRAFTERS
    from leap.search.factory import agent_factory
    from leap.search.memory.store import memory_for
    from leap.search.runner import OnlineSearch, SearchSettings

    model = _model(model)
    options = list(DEFAULT_DRAFTERS) if drafters == "default" else None if drafters is None else list(drafters)
    remembered = memory_for(model) if memory and options else None
    factory = agent_factory(agent, model.num_layers, seed=seed, drafters=options, memory=remembered)
    runner = OnlineSearch(SelfSpecDecoder(model, None), factory,
                          SearchSettings(steps_per_trial=steps_per_trial, **settings), memory=remembered)
    return runner.generate(prompt, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, chat=chat)
