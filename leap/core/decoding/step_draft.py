"""What one decoding step has drafted so far: :class:`StepDraft`, filled and read by
:meth:`leap.core.decoding.session.DecodingSession._step` (drafting, verification, acceptance)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from leap.core.config import LayerConfig
from leap.core.verify.sampling import draft_rows

if TYPE_CHECKING:
    from leap.core.drafters import Drafter

__all__ = ["StepDraft", "commit_cut", "describe"]


@dataclass
class StepDraft:
    """One step's draft: tokens known on the host, then (greedy layer drafts with a policy that reads
    nothing) tokens still on the device, read together with the verification's verdict."""

    t_start: object  # the step's first clock mark
    tokens: list[int] = field(default_factory=list)
    on_device: list[torch.Tensor] = field(default_factory=list)  # ``[1]`` token ids not read yet, after ``tokens``
    q_rows: list[torch.Tensor] = field(default_factory=list)  # draft distributions (sampling)
    saved: list[torch.Tensor] = field(default_factory=list)  # exact-prefix outputs, reused by verification
    prefix: int = 0  # layers of the exact prefix (0: none kept)
    layer_tokens: int = 0  # tokens the layers drafted
    passes: int = 0  # decoder-layer passes per layer-drafted token (an exit drafter's layers below its exit)
    spans: list[tuple] = field(default_factory=list)  # (start, end) marks of model computation

    @property
    def count(self) -> int:
        """Draft tokens so far, read or not."""
        return len(self.tokens) + len(self.on_device)

    def take_free(self, tokens, distributions, eos, rows_on=None) -> None:
        """Step 1a: a model-free chain, cut after its first EOS; its draft distribution is one-hot
        (deterministic proposals, ``None``), or the ``{token: q}`` map a sampling drafter drew the token
        from. Under sampling (``rows_on`` = (vocabulary size, device)) the chain's rows are filled on the
        device in one scatter (two host-to-device copies per step)."""
        taken: list[dict[int, float]] = []
        for i, token in enumerate(tokens):
            self.tokens.append(int(token))
            taken.append(distributions[i] if distributions is not None and distributions[i] is not None
                         else {int(token): 1.0})
            if token in eos:
                break
        if rows_on is not None and taken:
            self.q_rows.extend(draft_rows(taken, *rows_on).unbind(0))

    def ids(self, *before: int) -> list[int] | torch.Tensor:
        """``before`` then every draft token, as a list, or (with tokens still on the device) one tensor
        on the device - no read."""
        host = [*before, *self.tokens]
        if not self.on_device:
            return host
        dev = self.on_device[0].device
        return torch.cat([torch.tensor(host, dtype=torch.long, device=dev), *self.on_device])


def describe(drafter: Drafter | None, cfg: LayerConfig | None) -> str | None:
    """A step's or outcome's ``config`` string: the LayerConfig, ``drafter:NAME`` or ``drafter:NAME+CONFIG``
    (``drafter:NAME@K[+CONFIG]`` for a drafter with an exit layer ``K``)."""
    if drafter is None or drafter.name == "layer-skip":
        return str(cfg) if cfg is not None else None
    if drafter.exit_layer is not None:  # only the layers below the exit draft: name the layer, and the
        k = drafter.exit_layer  # configuration when it skips or repeats one of them
        return f"drafter:{drafter.name}@{k}" + (f"+{cfg}" if cfg is not None and cfg.exact_prefix < k else "")
    return f"drafter:{drafter.name}" + (f"+{cfg}" if cfg is not None else "")


def commit_cut(new: list[int], eos: frozenset[int] | set[int], room: int) -> tuple[list[int], str]:
    """What a step commits of ``new`` (accepted drafts and the verifier's token): cut after its first EOS and to the
    ``room`` tokens left, and the stop it brings - ``"eos"`` when ``new`` holds an EOS, ``"max_new_tokens"`` when
    the budget is spent, else ``""``. One rule for a request alone
    (:meth:`leap.core.decoding.session.DecodingSession._commit`) and every row of a batch
    (:mod:`leap.core.decoding.batch`)."""
    reason = ""
    for i, tok in enumerate(new):
        if tok in eos:
            new, reason = new[: i + 1], "eos"
            break
    kept = new[: max(room, 0)]
    if not reason and room - len(kept) <= 0:
        reason = "max_new_tokens"
    return kept, reason
