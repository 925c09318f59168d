"""Records of what a generation did: per step (:class:`StepRecord`) and per prompt (:class:`GenerationOutcome`).

Field names follow Spec-Bench's answer records where they overlap (``new_tokens``, ``wall_time``,
``accept_lengths``): ``accepted_lengths[i]`` is the number of tokens step ``i`` committed (accepted
draft tokens plus the verifier's own token), so its mean is the "mean accepted length" M of the LEAP
and Spec-Bench tables (1.0 for plain decoding).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["StepRecord", "GenerationOutcome"]


@dataclass(frozen=True)
class StepRecord:
    """One draft/verify iteration.

    Attributes:
        drafted: draft tokens proposed.
        accepted: draft tokens the verifier kept.
        committed: tokens appended to the output (``accepted + 1``, fewer if EOS or the budget cut it).
        draft_time_s / verify_time_s: wall time of the two phases (GPU synchronised).
        forward_time_s: time of that inside model computation (the rest is leap's own overhead).
        layer_passes: decoder-layer evaluations the draft spent (for cost models).
        config: string form of the draft's :class:`~leap.core.config.LayerConfig` (None = plain).
        layer_tokens: draft tokens the layers produced (each one LM-head evaluation).
        drafter: the name of the model-free drafter that proposed tokens (None: layers only or plain).
    """

    drafted: int
    accepted: int
    committed: int
    draft_time_s: float
    verify_time_s: float
    forward_time_s: float
    layer_passes: int
    config: str | None
    layer_tokens: int = 0
    drafter: str | None = None

    @property
    def time_s(self) -> float:
        return self.draft_time_s + self.verify_time_s


@dataclass
class GenerationOutcome:
    """Everything one generation did; ``to_dict()`` is what ``leap generate --json`` prints."""

    text: str
    token_ids: list[int]
    prompt_tokens: int
    wall_time_s: float
    prefill_time_s: float
    stop_reason: str
    config: str | None
    policy: str | None
    temperature: float
    top_p: float
    steps: list[StepRecord] = field(default_factory=list)
    policy_state: dict[str, Any] = field(default_factory=dict)

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def committed_lengths(self) -> list[int]:
        """Tokens each step committed (accepted draft tokens + the verifier's own)."""
        return [s.committed for s in self.steps]

    @property
    def mean_committed(self) -> float:
        """Committed tokens per step: the "mean accepted length" M of the LEAP and Spec-Bench tables."""
        return sum(self.committed_lengths) / len(self.steps) if self.steps else 0.0

    # the names the papers' tables and Spec-Bench's records use for the same two quantities
    accepted_lengths = committed_lengths
    mean_accepted = mean_committed

    @property
    def draft_tokens_proposed(self) -> int:
        return sum(s.drafted for s in self.steps)

    @property
    def draft_tokens_accepted(self) -> int:
        return sum(s.accepted for s in self.steps)

    @property
    def acceptance_rate(self) -> float:
        proposed = self.draft_tokens_proposed
        return self.draft_tokens_accepted / proposed if proposed else 0.0

    @property
    def layers_per_draft_token(self) -> float:
        proposed = self.draft_tokens_proposed
        return sum(s.layer_passes for s in self.steps) / proposed if proposed else 0.0

    @property
    def draft_time_s(self) -> float:
        return sum(s.draft_time_s for s in self.steps)

    @property
    def verify_time_s(self) -> float:
        return sum(s.verify_time_s for s in self.steps)

    @property
    def forward_time_s(self) -> float:
        return sum(s.forward_time_s for s in self.steps)

    @property
    def overhead_s(self) -> float:
        """Decoding-loop time outside model computation (leap's own code)."""
        return max(0.0, sum(s.time_s for s in self.steps) - self.forward_time_s)

    @property
    def decode_time_s(self) -> float:
        return self.wall_time_s - self.prefill_time_s

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.wall_time_s if self.wall_time_s > 0 else 0.0

    def to_dict(self, *, with_steps: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "token_ids": list(self.token_ids),
            "new_tokens": self.new_tokens,
            "prompt_tokens": self.prompt_tokens,
            "wall_time_s": self.wall_time_s,
            "prefill_time_s": self.prefill_time_s,
            "tokens_per_s": self.tokens_per_s,
            "steps": len(self.steps),
            "accepted_lengths": self.accepted_lengths,
            "mean_accepted": self.mean_accepted,
            "draft_tokens_proposed": self.draft_tokens_proposed,
            "draft_tokens_accepted": self.draft_tokens_accepted,
            "acceptance_rate": self.acceptance_rate,
            "layers_per_draft_token": self.layers_per_draft_token,
            "draft_time_s": self.draft_time_s,
            "verify_time_s": self.verify_time_s,
            "forward_time_s": self.forward_time_s,
            "overhead_s": self.overhead_s,
            "stop_reason": self.stop_reason,
            "config": self.config,
            "policy": self.policy,
            "policy_state": self.policy_state,
            "temperature": self.temperature,
            "top_p": self.top_p,
        }
        if with_steps:
            out["step_records"] = [asdict(s) for s in self.steps]
        return out
