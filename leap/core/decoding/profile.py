"""Where a generation's time went (issue 35's profile, first cut): ``leap generate ... --profile``.

From a :class:`~leap.core.decoding.outcome.GenerationOutcome` alone: the prefill; the draft phase (total and per
draft token); verification (total and per step); what is left of the call - the drafter joining the request
(the low-bit draft taking in the prompt), tokenising and session set-up, from the whole call's clock; and, inside
the steps, the target model's forwards (:attr:`~leap.core.decoding.outcome.StepRecord.forward_time_s`) against the
rest (the drafter's own model, leap's code). Given the plain step of the same
run (``--compare``), the per-token draft cost and the per-step verification cost are also said in plain steps -
the units of issue 35's targets (a draft token at <= 0.12 of a plain step).

The parts add up to the call's time by construction of ``other_s``; the test checks the arithmetic of
every other figure against the step records. Not yet here: host syncs by kind and the bandwidth floors (they
need a bandwidth measurement in the calibration).

Who calls what: :mod:`leap.cli.generate` (``--profile``: printed, and under ``"profile"`` in ``--json``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["time_profile", "format_profile"]


def time_profile(outcome: Any, plain_step_s: float | None = None, call_s: float | None = None
                 ) -> dict[str, float | int | None]:
    """The breakdown of ``outcome`` (see the module docstring); ``plain_step_s``: a plain step of the same run;
    ``call_s``: the whole call's clock (the harness's: tokenising, the drafter joining - outside the outcome's
    own wall time)."""
    steps = outcome.steps
    draft = sum(s.draft_time_s for s in steps)
    verify = sum(s.verify_time_s for s in steps)
    forward = sum(s.forward_time_s for s in steps)
    drafted = sum(s.drafted for s in steps)
    wall = outcome.wall_time_s if call_s is None else call_s
    out: dict[str, float | int | None] = {
        "wall_s": wall, "prefill_s": outcome.prefill_time_s, "draft_s": draft, "verify_s": verify,
        "other_s": wall - outcome.prefill_time_s - draft - verify,
        "model_forward_s": forward, "outside_forward_s": draft + verify - forward,
        "steps": len(steps), "draft_tokens": drafted,
        "draft_per_token_s": draft / drafted if drafted else None,
        "verify_per_step_s": verify / len(steps) if steps else None,
        "plain_step_s": plain_step_s, "draft_token_in_plain_steps": None, "verify_in_plain_steps": None,
    }
    if plain_step_s:
        if drafted:
            out["draft_token_in_plain_steps"] = out["draft_per_token_s"] / plain_step_s
        if steps:
            out["verify_in_plain_steps"] = out["verify_per_step_s"] / plain_step_s
    return out


def format_profile(p: dict[str, Any]) -> str:
    """Human-readable lines of :func:`time_profile`."""
    ms = lambda x: "-" if x is None else f"{1000 * x:.1f} ms"  # noqa: E731
    steps = lambda x: "" if x is None else f" = {x:.2f} plain steps"  # noqa: E731
    share = lambda x: f"{100 * x / p['wall_s']:.0f}%" if p["wall_s"] else "-"  # noqa: E731
    return "\n".join([
        f"profile: {ms(p['wall_s'])} in all",
        f"  prefill          {ms(p['prefill_s']):>10} ({share(p['prefill_s'])})",
        f"  draft            {ms(p['draft_s']):>10} ({share(p['draft_s'])}); {p['draft_tokens']} draft tokens, "
        f"{ms(p['draft_per_token_s'])} each{steps(p['draft_token_in_plain_steps'])}",
        f"  verify           {ms(p['verify_s']):>10} ({share(p['verify_s'])}); {p['steps']} steps, "
        f"{ms(p['verify_per_step_s'])} each{steps(p['verify_in_plain_steps'])}",
        f"  other            {ms(p['other_s']):>10} ({share(p['other_s'])}): the drafter joining (prompt "
        "ingestion), set-up",
        f"  inside the steps: the target model's forwards {ms(p['model_forward_s'])}, the rest (the drafter, "
        f"leap's code) {ms(p['outside_forward_s'])}",
    ])
