"""``LeapBatchSpec-v0``: how far to speculate in a batch, as a Gymnasium environment (issue 37).

Whether speculation pays at batch size B > 1 depends on how close B x (k + 1) verified positions bring the verifier to
compute-bound; the answer is measured on the batch itself, step by step. One episode = one batch of ``batch_size``
prompts decoded together (:class:`~leap.core.decoding.batch_session.BatchSession`, every row token-identical to
decoding it alone); one step = one batched verification step whose chain cap the action picks.

* **Action**: ``Discrete(len(caps))``, the index of the step's chain cap in ``caps`` (default ``(0, 2, 4, 8, 16)``;
  0 = no draft, a plain batched step); ``info["caps"]`` lists them.
* **Observation**: ``Box(5)`` - the batch size, the rows still decoding, the last step's committed tokens per row,
  the last step's cap, and the share of the batch's token budget used.
* **Reward** (measured, wall clock): the step's goodput over plain batched decoding's, ``committed x t_base /
  (seconds x rows)``, where ``t_base`` is a plain step of the whole batch timed at reset (after one untimed warm-up
  step; both steps' tokens are kept) and ``rows`` the rows then - so 1.0 is what not speculating gives, and the cap a
  loss is speculation that does not pay at this batch size. Registered with ``nondeterministic=True``.
* **Termination**: ``terminated`` when every row has reached EOS or ``max_new_tokens``; never truncated.

Constructor: ``model`` (a name/path or a loaded ``LeapModel``), ``drafter`` (a registered drafter that can draft in a
batch, :func:`~leap.core.decoding.batch.batch_refusal`; default ``lowbit``) and ``drafter_kwargs``, ``batch_size``,
``caps``, ``prompts`` (a JSONL file, strings or token-id lists; default: Spec-Bench's first turns),
``max_new_tokens``, ``chat``, ``device``, ``dtype``. ``reset(options={"prompt_indices": [...]})`` picks the batch's
prompts; by default they are drawn without replacement (with, when there are fewer prompts than rows).

Who calls what: RL and search code through ``gym.make("LeapBatchSpec-v0", ...)``; it steps a
:class:`~leap.core.decoding.batch_session.BatchSession` made by :meth:`leap.core.decoding.batch.BatchDecoder.start`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from leap.core.errors import SettingsError
from leap.envs.layer_search import _prompt_list

__all__ = ["LeapBatchSpecEnv"]


class LeapBatchSpecEnv(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, model: Any = "smollm2", drafter: str = "lowbit", *, batch_size: int = 4,
                 caps: Sequence[int] = (0, 2, 4, 8, 16), prompts: str | Sequence | None = None,
                 max_new_tokens: int = 64, drafter_kwargs: dict | None = None, chat: bool = True,
                 device: str = "auto", dtype: str | None = None, seed: int | None = None) -> None:
        from leap.core.decoding.batch import BatchDecoder
        from leap.core.modeling.model import LeapModel, load_model

        if int(batch_size) < 1:
            raise SettingsError(f"batch_size must be at least 1, got {batch_size}")
        self.caps = tuple(int(c) for c in caps)
        if not self.caps or len(set(self.caps)) != len(self.caps) or min(self.caps) < 0:
            raise SettingsError(f"caps must be distinct draft-token counts >= 0, got {list(caps)}")
        self.model = model if isinstance(model, LeapModel) else load_model(model, device=device, dtype=dtype)
        self.prompts = _prompt_list(prompts)
        self.batch_size, self.max_new_tokens = int(batch_size), int(max_new_tokens)
        self.chat = chat and bool(getattr(self.model.tokenizer, "chat_template", None))
        # num_tokens: the cap the env passes to each step is the action's; the decoder's own setting bounds nothing
        self.decoder = BatchDecoder(self.model, drafter, drafter_kwargs=drafter_kwargs, num_tokens=max(self.caps))
        self.action_space = spaces.Discrete(len(self.caps))
        self.observation_space = spaces.Box(0.0, np.inf, shape=(5,), dtype=np.float32)
        self.session = None
        self.t_base = 0.0  # a plain step of the whole batch (reset)
        self._base_rows = 0
        self._last = (0.0, 0)  # the last step's committed tokens per row and cap
        if seed is not None:
            self.reset(seed=seed)

    def _ids(self, prompt) -> list[int]:
        return self.model.encode(prompt, chat=self.chat) if isinstance(prompt, str) else [int(t) for t in prompt]

    def _obs(self) -> np.ndarray:
        s = self.session
        used = sum(len(r.token_ids) for r in s.rows) / (self.batch_size * self.max_new_tokens)
        return np.array([self.batch_size, len(s.active), self._last[0], self._last[1], used], dtype=np.float32)

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"caps": list(self.caps), "prompt_indices": list(self._indices), "batch_size": self.batch_size, **extra}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        indices = (options or {}).get("prompt_indices")
        if indices is None:
            replace = len(self.prompts) < self.batch_size
            indices = self.np_random.choice(len(self.prompts), size=self.batch_size, replace=replace)
        if len(indices) != self.batch_size:
            raise SettingsError(f"prompt_indices names {len(indices)} prompts for a batch of {self.batch_size}")
        self._indices = [int(i) for i in indices]
        self.session = self.decoder.start([self._ids(self.prompts[i]) for i in self._indices],
                                          max_new_tokens=self.max_new_tokens)
        self._base_rows, self.t_base, self._last = len(self.session.active), 0.0, (0.0, 0)
        for _ in range(2):  # one warm-up step, then the timed one: a plain step of the batch
            if not self.session.done:
                rows = len(self.session.active)
                committed, self.t_base = self.session.step(0)
                self._base_rows, self._last = rows, (committed / rows, 0)
        return self._obs(), self._info(terminated_at_reset=self.session.done)

    def step(self, action):
        if self.session is None:
            raise RuntimeError("call reset() before step()")
        if self.session.done:
            raise RuntimeError("the episode has ended; call reset()")
        cap = self.caps[int(action)]
        rows = len(self.session.active)
        committed, seconds = self.session.step(cap)
        self._last = (committed / rows, cap)
        reward = committed * self.t_base / (seconds * self._base_rows) if self.t_base > 0 and seconds > 0 else 0.0
        info = self._info(cap=cap, committed=committed, rows=rows, step_time_s=seconds)
        if self.session.done:
            info["token_ids"] = [list(r.token_ids) for r in self.session.rows]
        return self._obs(), float(reward), self.session.done, False, info
