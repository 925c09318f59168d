"""The search's regret: in each condition a run measured, the search against the best fixed choice of that run.

A search over drafters exists so that a researcher need not know which fixed choice wins on their model, machine and
workload; it earns its keep only if, in every condition, it is close to the best fixed choice *in hindsight*. For
each ``leap bench`` folder (a condition: its temperature, batch size, prompts, device) and temperature in it,
:func:`regret_rows` takes

* the **best fixed choice**: among the methods that do not search (plain decoding included; a method searches when
  it is one of :data:`SEARCHES` or its records carry ``search_iterations``), the one with the highest mean
  per-prompt speedup over plain decoding (a method run under a label, ``LABEL=NAME``, is NAME's kind);
* each **search**'s speedup over it, paired by prompt (``leap report DIR --baseline BEST``: the pooled ratio and its
  95% t interval), and a verdict: ``level`` when the point estimate is at least ``1 - tolerance`` (0.95) and the
  interval reaches 1.0, ``behind`` otherwise (a run of one prompt has no interval: its point estimate decides, and
  the verdict says so).

It also says whether one fixed choice is within ``tolerance`` of each cell's best in every cell (then a user could
simply fix it). ``leap report DIR... --regret`` prints the table; docs/results.md keeps it, its figures marked as
claims (``<!--claim DIR SEARCH speedup over BEST-->``) so the claims check recomputes them.

Who calls what: :mod:`leap.cli.report`; the records come from :mod:`leap.bench.records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RegretRow", "regret_rows", "regret_markdown", "always_close", "SEARCHES"]


@dataclass(frozen=True)
class RegretRow:
    folder: str
    condition: str
    temperature: float
    best: str  # the best fixed choice
    best_speedup: float  # its mean per-prompt speedup over plain decoding
    best_low: float  # and that mean's 95% t interval
    best_high: float
    search: str
    ratio: float  # the search over the best fixed choice, pooled, paired by prompt
    low: float
    high: float
    verdict: str  # "level" or "behind"
    fixed: dict[str, float]  # every fixed choice's mean per-prompt speedup over plain decoding


def _condition(records: Sequence[dict]) -> str:
    meta = next((r for r in records if r.get("kind") == "meta"), {})
    settings, machine = meta.get("settings", {}), meta.get("machine", {})
    units = len({str(r["question_id"]) for r in records if r.get("kind") == "answer"})
    batch = int(settings.get("batch_size", 1) or 1)
    device = machine.get("cuda") or machine.get("device", "?")
    return (f"B = {batch}, {units} {'batches' if batch > 1 else 'prompts'}, {settings.get('max_new_tokens', '?')} "
            f"tokens, {device} {machine.get('dtype', '')}").strip()


#: the bench methods that search (a search agent's own name also searches: its records carry ``search_iterations``)
SEARCHES = ("leap-drafters", "leap", "leap-no-zones", "leap-no-groups", "leap-no-search", "leap-low-bit")


def regret_rows(folders: Sequence[str | Path], tolerance: float = 0.05,
                searches: Sequence[str] = SEARCHES) -> list[RegretRow]:
    """One row per folder, temperature and search method (``searches``, or records with ``search_iterations``;
    see the module docstring)."""
    from leap.bench.records import read_records
    from leap.bench.report import summarise
    from leap.core.errors import LeapError

    out = []
    for folder in folders:
        records = read_records(folder)
        answers = [r for r in records if r.get("kind") == "answer" and r.get("status") == "ok"]
        meta = next((r for r in records if r.get("kind") == "meta"), {})
        # a method run under a label of its own (LABEL=NAME: leap-drafters-prior=leap-drafters) is its NAME's kind
        base = {label.strip(): (name or label).strip() for label, _, name
                in (str(m).partition("=") for m in meta.get("settings", {}).get("methods", []))}
        found = sorted({r["method"] for r in answers if "search_iterations" in r
                        or base.get(r["method"], r["method"]) in searches})
        if not found:
            raise LeapError(f"{folder} holds no search method (records with search_iterations); --regret compares a "
                            "search with the fixed choices run beside it")
        plain = summarise(records)
        for t in sorted({float(r["temperature"]) for r in answers}):
            overall = {r.method: r for r in plain if r.category == "overall" and r.temperature == t}
            fixed = {m: row.mean_ratio for m, row in overall.items() if m not in found}
            best = max(fixed, key=lambda m: fixed[m])
            over = {r.method: r for r in summarise(records, baseline=best) if r.category == "overall"
                    and r.temperature == t}
            for search in found:
                row = over[search]
                # one prompt has no interval over prompts: the point estimate alone decides, and the verdict says so
                alone = row.speedup_ci_high != row.speedup_ci_high  # NaN
                level = row.speedup >= 1 - tolerance and (alone or row.speedup_ci_high >= 1.0)
                low, high = overall[best].mean_ratio_ci_low, overall[best].mean_ratio_ci_high
                out.append(RegretRow(str(folder), _condition(records), t, best, fixed[best], low, high, search,
                                     row.speedup, row.speedup_ci_low, row.speedup_ci_high,
                                     ("level" if level else "behind") + (" (one prompt, no interval)" if alone else ""),
                                     dict(fixed)))
    return out


def always_close(rows: Sequence[RegretRow], tolerance: float = 0.05) -> list[str]:
    """The fixed choices within ``tolerance`` of each cell's best in every cell (empty: none is)."""
    cells = {(r.folder, r.temperature): r for r in rows}.values()
    names = set.intersection(*(set(r.fixed) for r in cells)) if cells else set()
    return sorted(m for m in names if all(r.fixed[m] >= (1 - tolerance) * r.best_speedup for r in cells))


def regret_markdown(rows: Sequence[RegretRow], tolerance: float = 0.05, markers: bool = True) -> str:
    """The regret table, and one line on whether a single fixed choice would do as well everywhere. With
    ``markers``, each figure carries its claim marker, so the table pasted into a page is checked against its
    records by the claims check (:mod:`leap.bench.claims`)."""
    lines = ["| condition | T | best fixed choice: mean speedup over plain | search | search / best fixed [95% CI] "
             "| verdict |", "|---|---|---|---|---|---|"]
    for r in rows:
        best = f"<!--claim {r.folder} {r.best} ratio-->" if markers else ""
        over = f"<!--claim {r.folder} {r.search} speedup over {r.best}-->" if markers else ""
        lines.append(f"| {r.condition} (`{r.folder}`) | {r.temperature:g} | `{r.best}`: {best}{r.best_speedup:.2f}x "
                     f"[{r.best_low:.2f}, {r.best_high:.2f}] | "
                     f"`{r.search}` | {over}{r.ratio:.2f}x [{r.low:.2f}, {r.high:.2f}] | {r.verdict} |")
    close = always_close(rows, tolerance)
    lines.append("")
    lines.append(f"Within {tolerance:.0%} of the best in every cell: "
                 + (", ".join(f"`{m}`" for m in close) + " (a fixed choice would do)" if close else "no fixed choice."))
    return "\n".join(lines) + "\n"
