"""PNG figures for ``leap redundancy --plot`` (matplotlib, an optional extra: ``pip install leap[plot]``).

* ``metrics.png`` - every metric per layer (one panel each), zones shaded, groups marked;
* ``observation1.png`` - Spearman correlation between prefill and later metrics, per metric and step.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_metrics", "plot_observation1"]

_ZONE_COLOURS = {"early": "#c6dbef", "middle": "#f7f7f7", "final": "#fdd0a2"}


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'leap[plot]'") from err
    return plt


def plot_metrics(report: dict, out: Path) -> Path:
    plt = _pyplot()
    names = sorted(report["metrics"])
    fig, axes = plt.subplots(len(names), 1, figsize=(10, 2.2 * len(names)), sharex=True)
    axes = [axes] if len(names) == 1 else axes
    L = report["num_layers"]
    for ax, name in zip(axes, names):
        for l, zone in enumerate(report["zones"]):
            ax.axvspan(l - 0.5, l + 0.5, color=_ZONE_COLOURS[zone], lw=0)
        for g in report["groups"][1:]:
            ax.axvline(g[0] - 0.5, color="grey", lw=0.6, ls=":")
        ax.plot(range(L), report["metrics"][name], marker="o", ms=3, color="black")
        ax.set_ylabel(name, fontsize=8)
    axes[-1].set_xlabel("layer (shading: blue early, white middle, orange final; dotted: group starts)")
    fig.suptitle(f"{report['model']}: per-layer metrics at prefill, mean over {report['prompts']} prompts")
    fig.tight_layout()
    path = Path(out) / "metrics.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_observation1(obs: dict, out: Path, title: str = "") -> Path:
    plt = _pyplot()
    metrics = sorted(obs["by_metric"])
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.2), sharey=True)
    axes = [axes] if len(metrics) == 1 else axes
    for ax, name in zip(axes, metrics):
        for cat, by_step in sorted(obs["by_metric"][name].items()):
            steps = sorted(int(s) for s in by_step)
            ax.plot(steps, [by_step[s] if s in by_step else by_step[str(s)] for s in steps], marker=".", lw=0.8,
                    alpha=0.6, label=cat)
        overall = obs["overall"][name]
        steps = sorted(int(s) for s in overall)
        ax.plot(steps, [overall[s] if s in overall else overall[str(s)] for s in steps], color="black", lw=2.5,
                label="all")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("decoded tokens")
        ax.set_ylim(-1, 1.02)
    axes[0].set_ylabel("Spearman rho vs prefill")
    axes[-1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(title or "Observation 1: prefill metrics vs metrics after decoding")
    fig.tight_layout()
    path = Path(out) / "observation1.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
