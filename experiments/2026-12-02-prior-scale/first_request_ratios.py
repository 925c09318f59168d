"""What each long-prompt cell's first request from the shipped prior measured, over the prior's mean for the same option.

    python experiments/2026-12-02-prior-scale/first_request_ratios.py docs/data/regret-xeon-1a91eb4/long-t0 ...

For each records folder: the first ``leap-drafters-prior`` request's trials (each option's mean trial reward), their
ratio to the shipped prior's ``long_prompts`` mean, and the median ratio - the scale
:meth:`leap.search.memory.SearchMemory._rescale_prior` gives the set (here from trials alone: the record keeps the fixed
phase's tokens, not its speedup). Then what the second request would open with: a memory started from the prior,
taught the first request (its kept option at its trials' mean), with the prior's scale taken and kept
(``rescale=False``): its favourite and the options :meth:`~leap.search.memory.SearchMemory.prune` leaves. Reads
records and the shipped prior only; decodes nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from leap.search.drafter_space import parse_option
from leap.search.memory import SearchMemory

PRIOR = Path(__file__).resolve().parents[2] / "leap" / "data" / "search_memory" / "SmolLM2-135M-Instruct.json"


def main(folders: list[str]) -> None:
    prior = json.loads(PRIOR.read_text())["long_prompts"]
    for folder in folders:
        for line in (Path(folder) / "records.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record.get("method") == "leap-drafters-prior":
                break
        else:
            print(f"{folder}: no leap-drafters-prior record")
            continue
        trials: dict[str, list[float]] = {}
        for config, reward in zip(record.get("trial_configs") or [], record.get("trial_rewards") or []):
            trials.setdefault(config, []).append(reward)
        ratios = {}
        print(f"{folder}: first request kept {record.get('config')}")
        for label, rewards in trials.items():
            if label in prior:
                mean = sum(rewards) / len(rewards)
                ratios[label] = mean / prior[label]["mean"]
                print(f"  {label:24s} trials {mean:.2f}  prior {prior[label]['mean']:.2f}  ratio {ratios[label]:.2f}")
        if ratios:
            print(f"  median ratio {statistics.median(ratios.values()):.2f}")
        means = {label: sum(r) / len(r) for label, r in trials.items()}
        for rescale in (True, False):
            memory = SearchMemory(None, rescale=rescale)
            memory.start_from_prior(PRIOR)
            memory.condition(1000)
            kept = record.get("config")
            memory.observe(means, kept, means.get(kept))
            options = [parse_option(label) for label in prior]
            favourite = memory.favourite(options, min_speedup=1.0)
            kept_next = ", ".join(f"{o.label} {memory.stats[o.label]['mean']:.2f}" for o in memory.prune(options))
            print(f"  rescale={rescale}: the next request's favourite {favourite.label if favourite else None}; "
                  f"offered {kept_next}")


if __name__ == "__main__":
    main(sys.argv[1:])
