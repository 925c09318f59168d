"""``leap report``: LEAP's Table 1 and Table 2 from a benchmark folder, as markdown or CSV, and plots.

Definitions (Spec-Bench's, computed over the *paired* generations: those where both the method and
plain decoding (``ar``) succeeded for the same question, turn, temperature and run):

* **speedup** of a method in a category = (sum of its new tokens / sum of its wall times) over
  (the same for ``ar``) - a ratio of tokens per second, pooled over the category's generations;
  the ``overall`` row pools every category. Wall times are the harness's clock around each whole
  call (search, probes and space building included).
* **speedup interval** (``speedup_ci_low``/``speedup_ci_high``): a 95% t interval over
  prompts (:mod:`leap.bench.stats`), and the **verdict** it alone decides: faster, slower or within
  noise. Beside it, the **mean of per-prompt ratios** with its own interval (every prompt weighs the
  same; the pooled figure weighs long generations more).
* **M** (mean accepted length) = committed tokens per decoding step = sum of new tokens / sum of
  steps (``ar``: 1 by definition).
* **lossless** (greedy only) = generations whose tokens equal plain decoding's, as ``k/n``.

Table 1: one row per method, per category ``M`` and speedup, and overall, for each temperature.
Table 2: LEAP's ablations (``leap``, ``leap-no-zones``, ``leap-no-groups``, ``leap-no-search``).

Who calls what: ``leap report DIR`` (:mod:`leap.cli`) calls :func:`summarise` then
:func:`table1_markdown` / :func:`table2_markdown` / :func:`to_csv` and, with ``--plot``,
:func:`plot_speedup` and :func:`plot_early_speedup`.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from leap.bench.stats import speedup_interval, verdict

__all__ = ["ReportRow", "summarise", "busy_prompts", "busy_warning", "table1_markdown", "table2_markdown", "to_csv", "plot_speedup",
           "plot_early_speedup", "ABLATIONS"]

ABLATIONS = {"leap": "LEAP", "leap-no-zones": "w/o zone", "leap-no-groups": "w/o group",
             "leap-no-search": "w/o MCTS"}


@dataclass
class ReportRow:
    method: str
    category: str
    temperature: float
    prompts: int
    generations: int
    mean_accepted: float
    speedup: float
    lossless: str  # "k/n" for greedy non-baseline methods, "" otherwise
    failed: int
    speedup_ci_low: float = float("nan")
    speedup_ci_high: float = float("nan")
    mean_ratio: float = float("nan")  # mean of per-prompt speedups
    mean_ratio_ci_low: float = float("nan")
    mean_ratio_ci_high: float = float("nan")
    verdict: str = ""


def _key(r: dict) -> tuple:
    return (str(r["question_id"]), int(r["turn"]), float(r["temperature"]), int(r["run"]))


def _tps(recs: Sequence[dict]) -> float:
    time = sum(r["wall_time_s"] for r in recs)
    return sum(r["new_tokens"] for r in recs) / time if time > 0 else 0.0


def _row(method: str, category: str, temperature: float, recs: list[dict], plain: dict[tuple, dict],
         failed: int) -> ReportRow:
    base = [plain[_key(r)] for r in recs]
    steps = sum(r["steps"] for r in recs)
    speedup = _tps(recs) / _tps(base) if recs and _tps(base) > 0 else float("nan")
    lossless = ""
    if temperature == 0 and method != "ar":
        checked = [r for r in recs if "lossless" in r]
        lossless = f"{sum(bool(r['lossless']) for r in checked)}/{len(checked)}"
    per_prompt: dict[str, list[float]] = {}
    for r, b in zip(recs, base):
        sums = per_prompt.setdefault(str(r["question_id"]), [0.0, 0.0, 0.0, 0.0])
        sums[0] += r["new_tokens"]
        sums[1] += r["wall_time_s"]
        sums[2] += b["new_tokens"]
        sums[3] += b["wall_time_s"]
    ci = speedup_interval([tuple(v) for v in per_prompt.values() if v[1] > 0 and v[3] > 0 and v[2] > 0])
    return ReportRow(method, category, temperature, len({r["question_id"] for r in recs}), len(recs),
                     sum(r["new_tokens"] for r in recs) / steps if steps else float("nan"), speedup, lossless, failed,
                     ci.pooled_low, ci.pooled_high, ci.mean_ratio, ci.mean_ratio_low, ci.mean_ratio_high,
                     verdict(ci) if method != "ar" else "")


def summarise(records: Sequence[dict[str, Any]], baseline: str = "ar") -> list[ReportRow]:
    """One :class:`ReportRow` per temperature, method and category, plus category ``overall``. Speedups are
    ratios to ``baseline`` (plain decoding, ``ar``, by default; another method gives one method over another,
    paired by prompt, e.g. the search over fixed ``lowbit``: ``leap report DIR --baseline lowbit``)."""
    answers = [r for r in records if r.get("kind") == "answer"]
    ok = {(_key(r), r["method"]): r for r in answers if r.get("status") == "ok"}  # a resumed retry wins
    plain = {k: r for (k, m), r in ok.items() if m == baseline}
    methods = list(dict.fromkeys(r["method"] for r in answers))
    categories = list(dict.fromkeys(r["category"] for r in answers))
    temps = sorted({float(r["temperature"]) for r in answers})
    rows = []
    for t in temps:
        for m in methods:
            mine = [r for (k, mm), r in ok.items() if mm == m and k[2] == t and k in plain]
            failed = [r for r in answers if r["method"] == m and float(r["temperature"]) == t
                      and r.get("status") != "ok" and (_key(r), m) not in ok]
            for cat in categories:
                recs = [r for r in mine if r["category"] == cat]
                n_failed = sum(r["category"] == cat for r in failed)
                if recs or n_failed:
                    rows.append(_row(m, cat, t, recs, plain, n_failed))
            if mine or failed:
                rows.append(_row(m, "overall", t, mine, plain, len(failed)))
    return rows


def busy_prompts(records: Sequence[dict[str, Any]], factor: float = 3.0) -> list[dict[str, Any]]:
    """Plain-decoding generations that ran more than ``factor`` times slower a step than the run's median plain
    generation: plain decoding's pace hardly depends on the prompt on one machine, so such a generation was timed
    while something else held the CPU (GPU), and every ratio paired with it is wrong
    (docs/data/search_pays/t1_128: plain decoding took 136 s for 128 tokens on one prompt, 5-7 s on most). The pace
    is decoding's time a step (``decode_s / steps``) where every record has them: a short generation after a long
    prefill is slow per token of its wall time but not busy (a batch of four rag prompts whose rows stopped after 8
    tokens: 110 ms a token against a median of 22, 56 ms a step against 69 -
    docs/data/regret-xeon-9b7f036/b4-t1, batch ``b19``); else the wall time a new token."""
    plain = [r for r in records if r.get("kind") == "answer" and r.get("status") == "ok" and r["method"] == "ar"
             and r.get("new_tokens", 0) > 0 and r.get("wall_time_s", 0) > 0]
    if len(plain) < 3:
        return []
    by_step = all(r.get("steps", 0) > 0 and r.get("decode_s", 0) > 0 for r in plain)

    def pace(r: dict[str, Any]) -> float:
        return r["decode_s"] / r["steps"] if by_step else r["wall_time_s"] / r["new_tokens"]

    median = sorted(pace(r) for r in plain)[len(plain) // 2]
    return [r for r in plain if pace(r) > factor * median]


def busy_warning(records: Sequence[dict[str, Any]]) -> str:
    """One warning naming the generations :func:`busy_prompts` finds ("" when none)."""
    busy = busy_prompts(records)
    if not busy:
        return ""
    names = ", ".join(f"{r['category']} {r['question_id']}" for r in busy[:8]) + (" ..." if len(busy) > 8 else "")
    return (f"WARNING: plain decoding ran over 3x slower than its median pace on {len(busy)} prompt(s) "
            f"({names}): the machine was busy then, and every ratio on those prompts is wrong - rerun on a quiet "
            "machine (a fresh --out folder)\n")


def divergence_note(records: Sequence[dict[str, Any]]) -> str:
    """Outside float32 (``divergence_margin`` in the records, :mod:`leap.core.verify.divergence`): per method, how many
    greedy outputs left plain decoding's and plain decoding's top-2 logit margin where each first did ("" when none)."""
    margins: dict[str, list[float]] = {}
    for r in records:
        if r.get("kind") == "answer" and r.get("divergence_margin") is not None:
            margins.setdefault(r["method"], []).append(float(r["divergence_margin"]))
    if not margins:
        return ""
    parts = [f"`{m}` {len(v)} (median {statistics.median(v):.3g}, max {max(v):.3g})" for m, v in margins.items()]
    return ("Outputs that left plain decoding's, and plain decoding's top-2 logit margin where each first did "
            "(rounding at a near-tie outside float32): " + "; ".join(parts) + "\n")


def _fmt(x: float, spec: str) -> str:
    return "-" if x != x else format(x, spec)  # NaN -> "-"


_MARK = {"faster": " +", "slower": " -", "within noise": " ~", "too few prompts": " ?"}


def _interval(x: float, low: float, high: float) -> str:
    if x != x:
        return "-"
    return f"{x:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if low == low else "")


def table1_markdown(rows: Sequence[ReportRow], methods: Sequence[str] | None = None) -> str:
    """LEAP Table 1: per temperature, rows = methods, columns = categories (M / speedup) and overall."""
    out = []
    for t in sorted({r.temperature for r in rows}):
        sel = [r for r in rows if r.temperature == t and (methods is None or r.method in methods)]
        cats = [c for c in dict.fromkeys(r.category for r in sel) if c != "overall"]
        by = {(r.method, r.category): r for r in sel}
        names = list(dict.fromkeys(r.method for r in sel))
        out.append(f"**T = {t:g}** (cells: M / speedup, pooled tokens/s over plain decoding's, with the "
                   f"t-interval verdict: + faster, - slower, ~ within noise, ? too few prompts)\n")
        out.append("| method | " + " | ".join(cats) + " | overall M | overall speedup [95% CI] "
                   "| mean per-prompt ratio [95% CI] | lossless | failed |")
        out.append("|---|" + "---|" * (len(cats) + 5))
        for m in names:
            cells = [f"{_fmt(by[m, c].mean_accepted, '.2f')} / {_fmt(by[m, c].speedup, '.2f')}x"
                     f"{_MARK.get(by[m, c].verdict, '')}" if (m, c) in by else "" for c in cats]
            o = by.get((m, "overall"))
            tail = [_fmt(o.mean_accepted, ".2f"), _interval(o.speedup, o.speedup_ci_low, o.speedup_ci_high),
                    _interval(o.mean_ratio, o.mean_ratio_ci_low, o.mean_ratio_ci_high), o.lossless or "-",
                    str(o.failed)] if o else ["", "", "", "", ""]
            out.append(f"| {m} | " + " | ".join(cells + tail) + " |")
        out.append("")
    return "\n".join(out)


def table2_markdown(rows: Sequence[ReportRow]) -> str:
    """LEAP Table 2 (ablations): overall M and speedup of LEAP and its ablations per temperature."""
    temps = sorted({r.temperature for r in rows})
    by = {(r.method, r.temperature): r for r in rows if r.category == "overall"}
    present = [m for m in ABLATIONS if any((m, t) in by for t in temps)]
    if not present:
        return "(no ablation methods in these records: run leap, leap-no-zones, leap-no-groups, leap-no-search)\n"
    head = "| method | " + " | ".join(f"T={t:g} M | T={t:g} speedup [95% CI]" for t in temps) + " |"
    lines = [head, "|---|" + "---|---|" * len(temps)]
    for m in present:
        cells = []
        for t in temps:
            r = by.get((m, t))
            cells += [_fmt(r.mean_accepted, ".2f"), _interval(r.speedup, r.speedup_ci_low, r.speedup_ci_high)] \
                if r else ["", ""]
        lines.append(f"| {ABLATIONS[m]} (`{m}`) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(rows: Sequence[ReportRow]) -> str:
    """One CSV row per method, category (and ``overall``) and temperature."""
    buf = io.StringIO()
    fields = list(asdict(rows[0])) if rows else list(ReportRow.__dataclass_fields__)
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        d = asdict(r)
        for name in ("mean_accepted", "speedup", "speedup_ci_low", "speedup_ci_high", "mean_ratio",
                     "mean_ratio_ci_low", "mean_ratio_ci_high"):
            d[name] = round(d[name], 4)
        writer.writerow(d)
    return buf.getvalue()


def plot_speedup(rows: Sequence[ReportRow], out: str | Path) -> list[Path]:
    """``speedup_T{t}.png``: speedup per category (and overall) for every method, one file per temperature."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    paths = []
    for t in sorted({r.temperature for r in rows}):
        sel = [r for r in rows if r.temperature == t and r.method != "ar"]
        cats = list(dict.fromkeys(r.category for r in sel))
        names = list(dict.fromkeys(r.method for r in sel))
        by = {(r.method, r.category): r.speedup for r in sel}
        fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(cats) * max(1, len(names)) / 3), 4.5))
        width = 0.8 / max(1, len(names))
        x = np.arange(len(cats))
        for i, m in enumerate(names):
            ax.bar(x + i * width, [by.get((m, c), np.nan) for c in cats], width, label=m)
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xticks(x + 0.4 - width / 2, cats, rotation=30, ha="right")
        ax.set_ylabel("speedup over plain decoding")
        ax.set_title(f"Speedup per category, T = {t:g}")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = Path(out) / f"speedup_T{t:g}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def early_speedup(records: Sequence[dict[str, Any]], iterations: int = 20) -> dict[str, list[float]]:
    """Mean measured speedup (search reward) at each of the first ``iterations`` search iterations of
    a prompt, per search method (LEAP's early-stage comparison with SWIFT and CLaSP)."""
    out: dict[str, list[float]] = {}
    for m in dict.fromkeys(r["method"] for r in records if r.get("trial_rewards")):
        series = [r["trial_rewards"] for r in records if r.get("method") == m and r.get("trial_rewards")]
        means = []
        for i in range(iterations):
            vals = [s[i] for s in series if len(s) > i]
            if not vals:
                break
            means.append(sum(vals) / len(vals))
        out[m] = means
    return out


def plot_early_speedup(records: Sequence[dict[str, Any]], out: str | Path, iterations: int = 20) -> Path | None:
    """``early_speedup.png``: :func:`early_speedup` as lines, one per search method."""
    curves = early_speedup(records, iterations)
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for m, ys in curves.items():
        ax.plot(range(1, len(ys) + 1), ys, marker="o", ms=3, label=m)
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xlabel("search iteration within a prompt")
    ax.set_ylabel("measured speedup of the step (mean over prompts)")
    ax.set_title("Early-stage speedup of the search methods")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(out) / "early_speedup.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
