"""What earlier requests measured, kept for the next request's search: a prior over drafter options.

A search over drafters (:class:`~leap.search.drafter_space.JointSpace`) pays its trials on every request: options that
never win cost real steps each time (``docs/data/joint_v4``). :class:`SearchMemory` keeps, per drafter option (its
label), the running mean over requests of its trials' reward and of its fixed phase's speedup; before a request,
:meth:`SearchMemory.prune` leaves out the options that keep losing - successive halving across requests (Jamieson &
Talwalkar 2016; Hyperband, Li et al. 2018): an option seen on ``min_requests`` requests whose mean is below ``keep``
times the best *floor* (an option's mean less its discounted spread over requests) is not searched again, elimination
against a lower bound of the best as in successive elimination (Even-Dar, Mannor & Mansour 2006): a copying drafter's
mean over two prompts it could copy from pruned the steady ``lowbit`` options otherwise
(``docs/data/regret-7212270/long-t0``, 484). Options not seen enough stay in; after a request whose choice did not pay
the cut is wider (``keep`` squared). The batch sets (below) rank by means alone.

It persists under ``$LEAP_CACHE/search_memory`` per model, device and dtype (:mod:`leap.search.memory.store`) or lives
in memory only (``path=None``: a benchmark's, never scoring evaluation prompts by an earlier run's); ``--no-memory``.

**The shipped prior.** A memory still empty starts from the prior leap ships for the model where its device type and
dtype match, each option counted as seen on ``min_requests`` requests at most, and the first request a set of it
measures here gives the set this machine's scale (:mod:`leap.search.memory.prior`; ``rescale=False``: the ablation).
``leap bench`` uses the prior only when asked (``memory=prior``).

**Ageing.** Each remembered option carries its drafter's :meth:`~leap.core.drafters.base.Drafter.fingerprint`: an
option whose fingerprint changed is forgotten (:meth:`SearchMemory.prune`); a file of an older leap starts afresh, said
on stderr. Means are discounted: each measurement moves one by at least ``1/horizon`` (Garivier & Moulines 2011); an
option not measured for ``recheck`` requests counts as unseen again, one at a time (:meth:`SearchMemory.rechecked`).

**Conditions.** What wins on short prompts need not win on long ones, nor at T = 0 at T > 0, nor alone in a batch
(``docs/data/regret-xeon-adf6f19/b4-t1``), so the memory keeps a set of means per condition
(:meth:`SearchMemory.condition`): prompts of fewer than ``long_prompt`` tokens (512; 0: one set) and the rest, and
batches, each at T = 0 and T > 0 (``sampled=False``: one set for both). All above reads and writes the request's set
alone; the shipped prior fills each from its own prompts (:func:`leap.heads.prompts.long_seed_prompts` for long ones).
A batch's set holds one mean per drafter, its best (drafter, cap) arm's goodput over plain batched decoding's
(:meth:`observe_batch`), read by :meth:`rank_drafters` (:class:`~leap.search.batch.BatchSearch`): the single-request
favourite ``cascade`` drafted most batches at 0.84 of ``lowbit-auto`` otherwise (``docs/data/regret-6bd5159/b4-t0``).

Who calls what: :func:`leap.search.factory.agent_factory` prunes each request's options with it;
:class:`leap.search.runner.OnlineSearch` names each request's condition (:meth:`condition`), asks :meth:`settles`
after each trial and records what it measured (:meth:`observe`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from leap.core.runtime.notices import say_once
from leap.search.memory.prior import prior_sets, rescale

__all__ = ["SearchMemory"]


#: the layout of a memory file; a file of another (an older leap's) starts afresh
SCHEMA = 2
#: each set of means (:meth:`SearchMemory.condition`) and the field a memory file or a shipped prior keeps it under
FIELDS = (("short", "options"), ("long", "long_prompts"), ("sampled", "sampled"),
          ("sampled-long", "sampled_long_prompts"), ("batch", "batches"), ("sampled-batch", "sampled_batches"))


class SearchMemory:
    """Discounted means per drafter option over requests (see the module docstring)."""

    def __init__(self, path: str | Path | None = None, *, keep: float = 0.85, min_requests: int = 2,
                 horizon: int = 8, recheck: int = 16, long_prompt: int = 512, sampled: bool = True,
                 rescale: bool = True) -> None:
        if not 0 < keep <= 1 or min_requests < 1 or horizon < 0 or recheck < 0 or long_prompt < 0:
            raise ValueError("SearchMemory: keep in (0, 1], min_requests >= 1, horizon >= 0, recheck >= 0 and "
                             "long_prompt >= 0 (0: off)")
        self.path = None if path is None else Path(path)
        self.keep, self.min_requests = float(keep), int(min_requests)
        self.horizon, self.recheck, self.long_prompt = int(horizon), int(recheck), int(long_prompt)
        self.sampled = bool(sampled)  # T > 0 keeps its own sets (module docstring); False: the ablation
        self.rescale = bool(rescale)  # a prior's set takes this machine's scale at first contact; False: the ablation
        self.scales: dict[str, float] = {}  # each prior set's rescaling (:meth:`_rescale_prior`), for the file
        #: the means per condition (module docstring, :data:`FIELDS`): "short" (the file's "options"), "long", ...
        self.sets: dict[str, dict[str, dict[str, Any]]] = {key: {} for key, _ in FIELDS}
        self.length = "short"  # the set this request reads and writes (:meth:`condition`)
        self.requests = 0  # requests observed: the memory's clock (an entry's "last" is when it was measured)
        self.last_paid = True
        self.prior: Path | None = None  # the shipped prior this memory started from, if it did
        self.forgotten: list[str] = []  # options forgotten because their drafter changed (prune)
        self._fingerprints: dict[str, str] = {}  # today's, of the options last pruned: stamped on what observe learns
        self._recheck: str | None = None  # the stale option this request measures again (prune chooses it)
        if self.path is not None and self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
                if data.get("schema") != SCHEMA:
                    say_once(f"leap: the search memory at {self.path} is an older leap's; starting afresh", _SAID)
                else:
                    self.sets = {key: {k: dict(v) for k, v in data.get(field, {}).items()} for key, field in FIELDS}
                    self.requests = int(data.get("requests", 0))
                    self.last_paid = bool(data.get("last_paid", True))
                    self.scales = {str(k): float(v) for k, v in data.get("prior_scales", {}).items()}
            except (OSError, ValueError, AttributeError, TypeError):
                self.sets = {key: {} for key, _ in FIELDS}  # unreadable: start empty

    @property
    def stats(self) -> dict[str, dict[str, Any]]:
        return self.sets[self.length]  # the means of the set (condition) this request reads and writes

    @stats.setter
    def stats(self, value: dict[str, dict[str, Any]]) -> None:
        self.sets[self.length] = value

    def condition(self, prompt_tokens: int, rows: int = 1, temperature: float = 0.0) -> str:
        """Pick (and return) the set of means for a prompt of ``prompt_tokens`` tokens in a batch of ``rows`` decoded at
        ``temperature``: "batch" for more than one row, else "long" from ``long_prompt`` tokens on (with
        ``long_prompt`` set), else "short"; at T > 0 (with ``sampled``) "sampled-batch", "sampled-long" and "sampled"."""
        long = self.long_prompt and int(prompt_tokens) >= self.long_prompt
        length = "long" if long else "short"
        if self.sampled and float(temperature) > 0:
            length = "sampled-long" if long else "sampled"
        self.length = ("sampled-batch" if length.startswith("sampled") else "batch") if int(rows) > 1 else length
        return self.length

    empty = property(lambda self: not any(self.sets.values()), doc="Whether no set holds any mean yet.")

    def describe(self) -> str:
        """What a record says about the memory it started from."""
        where = "in memory only" if self.path is None else str(self.path)
        if self.prior is not None:
            where = f"started from the shipped prior {self.prior.parent.name}/{self.prior.name}; {where}"
        gone = f"; forgot {', '.join(self.forgotten)}: their drafters changed" if self.forgotten else ""
        named = {"long": "for long prompts", "sampled": "sampled", "sampled-long": "sampled on long prompts",
                 "batch": "drafters for batches", "sampled-batch": "drafters for sampled batches"}
        others = "".join(f", {len(self.sets[key])} {what}" for key, what in named.items() if self.sets[key])
        return f"{len(self.sets['short'])} options remembered{others} ({where}{gone})"

    def start_from_prior(self, path: str | Path) -> None:
        """Take a shipped prior's sets (see the module docstring), each entry counted on ``min_requests`` requests at
        most; the memory's own file is written at its first :meth:`observe`."""
        self.sets = prior_sets(json.loads(Path(path).read_text()), FIELDS, self.min_requests)
        self.requests = 0
        self.last_paid = True
        self.prior = Path(path)

    # ---------------------------------------------------------------- learning
    def _update(self, label: str, value: float) -> None:
        entry = self.stats.setdefault(label, {"requests": 0, "mean": 0.0})
        entry["requests"], entry["here"] = entry["requests"] + 1, self.requests_here(label) + 1
        weight = min(entry["requests"], self.horizon) if self.horizon else entry["requests"]
        delta = float(value) - entry["mean"]
        entry["mean"] += delta / weight
        # the spread over requests: a discounted variance (Welford's update where weight = requests)
        entry["var"] = entry.get("var", 0.0) + (delta * (float(value) - entry["mean"]) - entry.get("var", 0.0)) / weight
        entry["last"] = self.requests
        if label in self._fingerprints:
            entry["fingerprint"] = self._fingerprints[label]

    def observe(self, trial_means: dict[str, float], fixed: str | None, fixed_speedup: float | None) -> None:
        """One request: each option's mean trial reward on it, and the option kept for the rest of the request with its
        fixed phase's speedup (None: plain decoding kept, or no fixed phase), each counted once: the fixed phase ran far
        more steps than a 4-step trial, whose reward is partly luck (``docs/data/pre_and_carry``)."""
        self.requests += 1
        values = dict(trial_means)
        if fixed is not None and fixed_speedup is not None:
            values[fixed] = fixed_speedup
        if self.rescale:
            self._rescale_prior(values)
        for label, value in values.items():
            self._update(label, value)
        self.last_paid = fixed is not None and (fixed_speedup is None or fixed_speedup >= 1.0)
        self.save()

    def _rescale_prior(self, values: dict[str, float]) -> None:
        """Give this request's set, while it is the shipped prior's alone, this machine's scale
        (:func:`~leap.search.memory.prior.rescale`: ``values`` label -> speedup); said in the file's ``prior_scales``."""
        scale = rescale(self.stats, values, self.learnt_elsewhere)
        if scale is not None:
            self.scales[self.length] = scale

    def observe_batch(self, goodput: dict[str, float]) -> None:
        """One batch (in a batch set, :meth:`condition`): each drafter's best goodput over plain batched decoding's, as
        its bandit measured it (name -> ratio), on the memory's clock like a request; ``last_paid`` stays as it was."""
        self.requests += 1
        for label, value in goodput.items():
            self._update(label, value)
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"schema": SCHEMA, "requests": self.requests, "last_paid": self.last_paid,
                                       "prior_scales": self.scales,
                                       **{field: self.sets[key] for key, field in FIELDS}}, indent=1))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only cache only costs the prior

    def copy(self) -> SearchMemory:
        """The same state, in memory only: ``leap generate --compare`` starts every round from the memory as it was
        before the command, then keeps one round's copy (:meth:`adopt`)."""
        twin = SearchMemory(None, keep=self.keep, min_requests=self.min_requests, horizon=self.horizon,
                            recheck=self.recheck, long_prompt=self.long_prompt, sampled=self.sampled,
                            rescale=self.rescale)
        twin.sets, twin.length, twin.scales = _copied(self.sets), self.length, dict(self.scales)
        twin.last_paid, twin.prior, twin.requests = self.last_paid, self.prior, self.requests
        twin.forgotten, twin._fingerprints, twin._recheck = list(self.forgotten), dict(self._fingerprints), self._recheck
        return twin

    def adopt(self, other: SearchMemory) -> None:
        """Take ``other``'s state (a :meth:`copy`, kept or taught since) and save it to this memory's file."""
        self.sets, self.length, self.scales = _copied(other.sets), other.length, dict(other.scales)
        self.last_paid, self.requests, self._recheck = other.last_paid, other.requests, other._recheck
        self.save()

    # ---------------------------------------------------------------- using it
    def _stale(self, entry: dict[str, Any]) -> bool:  # not measured for recheck requests
        return bool(self.recheck) and self.requests - int(entry.get("last", self.requests)) >= self.recheck

    def _choose_recheck(self, labels: Sequence[str]) -> None:
        """Of ``labels`` (this request's options, so that one no longer offered never holds the turn), the one stale
        option it measures again: the longest unmeasured (ties: by label)."""
        stale = [(int(self.stats[label].get("last", self.requests)), label) for label in labels
                 if label in self.stats and self.stats[label]["requests"] >= self.min_requests
                 and self._stale(self.stats[label])]
        self._recheck = min(stale)[1] if stale else None

    def rechecked(self) -> str | None:
        """The stale option this request measures again (chosen by :meth:`prune` or :meth:`rank_drafters`), or None."""
        return self._recheck

    def _counts(self, label: str, entry: dict[str, Any]) -> bool:
        """Whether an entry is evidence: seen on ``min_requests`` requests, and not the stale option this request
        measures again (:meth:`rechecked`)."""
        return entry["requests"] >= self.min_requests and not (label == self._recheck and self._stale(entry))

    def expected(self, label: str) -> float | None:
        """What ``label`` measured on average over earlier requests, once it counts (:meth:`_counts`)."""
        entry = self.stats.get(label)
        return entry["mean"] if entry and self._counts(label, entry) else None

    def best_expected(self, here: bool = False) -> float | None:
        """The best :meth:`expected` of any option (None: none counts yet); ``here``: of the options this machine
        measured (not :meth:`learnt_elsewhere`), the bar a carried choice is held to (``OnlineSearch._carry``)."""
        return max((e["mean"] for k, e in self.stats.items()
                    if self._counts(k, e) and not (here and self.learnt_elsewhere(k))), default=None)

    def requests_here(self, label: str) -> int:  # the requests this machine measured it on (a prior's: 0)
        entry = self.stats.get(label, {"requests": 0})
        return int(entry.get("here", 0 if entry.get("last", 1) == 0 else entry["requests"]))

    def _unproven(self, label: str) -> bool:  # measured here, on fewer than min_requests requests
        return 0 < self.requests_here(label) and self.stats[label]["requests"] < self.min_requests

    def remembered(self, label: str) -> float | None:
        """:meth:`expected`, or the mean of an option this machine measured on fewer than ``min_requests`` requests."""
        return self.stats[label]["mean"] if self._unproven(label) else self.expected(label)

    def best_unproven(self) -> float | None:
        """The best mean of an :meth:`_unproven` option (None: none): a carried choice below it is dropped (_carry)."""
        return max((e["mean"] for label, e in self.stats.items() if self._unproven(label)), default=None)

    def favourite(self, options: Sequence[Any], min_speedup: float | None = None) -> Any | None:
        """The option of ``options`` (with a ``label``) whose :meth:`remembered` is highest (None: none is), the first
        trial under ``SearchSettings.favourite_first``; one measured here on one request counts. With ``min_speedup``
        (the runner's first trial) a favourite below it lost, and the first option not remembered comes first (None:
        none left; an H200's searches opened with a remembered loser: ``experiments/2026-11-28-gpu-regret``)."""
        known = [(mean, -i, o) for i, o in enumerate(options) if (mean := self.remembered(o.label)) is not None]
        best = max(known, key=lambda t: t[:2]) if known else None
        if best is None or min_speedup is None or best[0] >= min_speedup:
            return None if best is None else best[2]
        return next((o for o in options if self.remembered(o.label) is None), None)

    def learnt_elsewhere(self, label: str) -> bool:
        """Whether the memory knows ``label`` from the shipped prior alone (another machine's), never from here."""
        return label in self.stats and self.requests_here(label) == 0

    def settles(self, options: Sequence[Any], means: dict[str, float], *, min_speedup: float = 1.0,
                favourite_first: bool = False, handed: str | None = None, explore: int = 0,
                kin: dict[str, Any] | None = None, holding: list[str] | None = None) -> bool:
        """Whether a request whose options (with a ``label``) measured ``means`` (label -> mean trial reward) can stop
        searching: its leader reaches ``min_speedup`` and no other option can be expected to win - each is below
        ``keep`` times the leader by its trials or, untried, by its remembered mean (one neither tried nor remembered
        holds the search). With ``favourite_first`` the bar is the leader itself, and the favourite settles the request
        at once when its trials confirm it (at least ``keep`` times its remembered mean); while the memory has no
        favourite, the last request's leader tried first (``handed``) stands for it, unconfirmed. A favourite that leads
        explores one option not yet remembered a request, the others wait for later requests (each held the search
        otherwise, some 26 trials: ``docs/data/regret-464f4c9/long-t0``); whatever leads, a request that has tried
        ``explore`` options (0: no cap) stops waiting for the unknown too (``docs/data/regret-2549ba7/long-t0``).
        ``kin`` (label -> ``Drafter.shared_state_key``: options drafting with one model): a favourite that leads and
        pays but falls short of a mean :meth:`learnt_elsewhere` says how fast this machine runs its draft model, and its
        untried kin are expected at the same shortfall (``experiments/2026-11-28-shared-cascade``); after ``explore``
        options, the options only such a doubted prior vouches for stop holding the request. ``holding`` (a list)
        gets the labels of the untried options holding the request by a mean this machine measured on
        ``min_requests`` requests of its own, best first: the prior's means screen but do not choose trials. Who calls
        it: the runner."""
        if not means:
            return False
        best = means[leader := max(means, key=means.get)]
        favourite = self.favourite([o for o in options if not o.uses_layers]) if favourite_first else None
        leads = (favourite.label if favourite is not None else handed if favourite_first else None) == leader
        confirmed = leads and favourite is not None and best >= self.keep * self.remembered(leader)
        capped = 0 < explore <= len(means)  # below: explored one unknown, or explore options
        explored = capped or leads and any(self.expected(label) is None for label in means if label != leader)
        shortfall = best / self.expected(leader) if leads and favourite is not None and not confirmed and kin \
            and kin.get(leader) is not None and self.learnt_elsewhere(leader) else 1.0
        doubted = capped and favourite is not None and favourite.label in means and self.learnt_elsewhere(
            favourite.label) and means[favourite.label] < self.keep * self.expected(favourite.label)
        settled, held = True, []
        for option in options:
            if option.label == leader:
                continue
            evidence = means.get(option.label, self.expected(option.label))  # its trials here, else the memory's
            if evidence is not None and option.label not in means and kin and kin.get(option.label) == kin.get(leader):
                evidence *= shortfall  # kin of a favourite that fell short of another machine's mean (docstring)
            if doubted and option.label not in means and self.learnt_elsewhere(option.label):
                continue  # only a prior its favourite contradicted vouches for it, and explore options were tried
            if evidence is None:
                settled = settled and explored
            elif not confirmed and evidence >= (1.0 if favourite_first else self.keep) * best:
                settled = False  # held: untried, remembered from min_requests of this machine's own requests
                own = self.requests_here(option.label) >= self.min_requests
                held += [(evidence, option.label)] if option.label not in means and own else []
        if holding is not None:  # the untried options that hold the request by what the memory remembers, best first
            holding[:] = [label for _, label in sorted(held, reverse=True)]
        return settled and best >= min_speedup

    def forget_changed(self, fingerprints: dict[str, str]) -> None:
        """Forget each option whose drafter's fingerprint is not today's (``fingerprints``: label -> fingerprint), said
        once on stderr; what is learnt next, and an entry without one (set by hand, unstamped), takes today's."""
        self._fingerprints.update(fingerprints)
        changed = sorted({label for means in self.sets.values() for label, fp in fingerprints.items()
                          if label in means and means[label].get("fingerprint") not in (None, fp)})
        for means in self.sets.values():
            for label, fp in fingerprints.items():  # an entry without one (set by hand, an unstamped prior): today's
                if label in means and means[label].get("fingerprint") is None:
                    means[label]["fingerprint"] = fp
            for label in changed:
                means.pop(label, None)
        if changed:
            self.forgotten.extend(changed)
            say_once(f"leap: the search memory forgot {', '.join(changed)}: their drafters changed since", _SAID)

    def prune(self, options: Sequence[Any], fingerprints: dict[str, str] | None = None) -> tuple[Any, ...]:
        """``options`` (objects with a ``label``) less those that keep losing; the best-remembered first. With
        ``fingerprints`` (label -> today's drafter fingerprint), options whose drafter changed are forgotten first."""
        if fingerprints:
            self.forget_changed(fingerprints)
        self._choose_recheck([o.label for o in options])
        seen = {o.label: self.stats[o.label] for o in options
                if o.label in self.stats and self._counts(o.label, self.stats[o.label])}
        here = [e for label, e in seen.items() if not self.learnt_elsewhere(label)]  # the floor: measured here, if any
        floor = max((e["mean"] - e.get("var", 0.0) ** 0.5 for e in here or seen.values()), default=None)
        return self._ranked(options, {label: e["mean"] for label, e in seen.items()}, floor)

    def rank_drafters(self, options: Sequence[Any], fingerprints: dict[str, str] | None = None) -> tuple[Any, ...]:
        """:meth:`prune` for options that stand for their whole drafter (with a ``name`` and a ``label``: the batch
        level's, :func:`~leap.search.drafter_space.batch_options`, whose chain length is its bandit's cap), each judged
        by the best :meth:`expected` of any option of its drafter (``lowbit:num_tokens=14``'s speaks for ``lowbit``)."""
        if fingerprints:
            self.forget_changed(fingerprints)
        names = {o.name for o in options}
        self._choose_recheck([label for label in self.stats if label.split(":", 1)[0] in names])
        best: dict[str, float] = {}
        for label, entry in self.stats.items():
            if self._counts(label, entry):
                name = label.split(":", 1)[0]
                best[name] = max(best.get(name, entry["mean"]), entry["mean"])
        return self._ranked(options, {o.label: best[o.name] for o in options if o.name in best})

    def _ranked(self, options: Sequence[Any], seen: dict[str, float], floor: float | None = None) -> tuple[Any, ...]:
        """``options`` less those whose remembered mean (``seen``, by label) is below ``keep`` (squared after a request
        that did not pay) times ``floor`` (default: the best mean); the best first, those not remembered last."""
        if not seen:
            return tuple(options)
        best = max(seen.values()) if floor is None else floor
        keep = self.keep if self.last_paid else self.keep ** 2
        kept = [o for o in options if o.label not in seen or seen[o.label] >= keep * best]
        return tuple(sorted(kept, key=lambda o: -seen.get(o.label, 0.0)))


_SAID: set[str] = set()  # said on stderr once per process: a memory that is dropped or forgets is never silent


def _copied(sets: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """A deep copy of a memory's sets of means (set -> label -> entry)."""
    return {name: {label: dict(entry) for label, entry in means.items()} for name, means in sets.items()}
