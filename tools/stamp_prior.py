"""Stamp a shipped search-memory prior with today's drafter fingerprints (``Drafter.fingerprint``): what
``SearchMemory.prune`` checks a remembered option against, so that an option whose drafter changes in a later leap is
forgotten instead of steering the search. benchmarks/search_prior.sh runs it on the prior it writes; run it by hand on
a prior made before fingerprints existed only when the drafters' definitions have not changed since its commit
(``git log COMMIT..HEAD -- leap/core/drafters leap/heads``).

Usage: python tools/stamp_prior.py leap/data/search_memory/SmolLM2-135M-Instruct.json [--model smollm2]
"""

from __future__ import annotations

import argparse
import json

from leap.core.modeling.model import load_model
from leap.search.drafter_space import option_fingerprints, parse_option
from leap.search.memory.means import FIELDS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("prior")
    ap.add_argument("--model", default="smollm2")
    args = ap.parse_args()
    data = json.load(open(args.prior))
    model = load_model(args.model, device=data.get("device_type", "cpu"), dtype=data.get("dtype", "float32"))
    # a batch set's labels are drafter names; every other set's are options, as the short set's
    entries = {label: entry for _, field in FIELDS for label, entry in data.get(field, {}).items()}
    stamps = option_fingerprints([parse_option(label) for label in entries], model)
    for _, field in FIELDS:
        for label, entry in data.get(field, {}).items():
            entry["fingerprint"] = stamps[label]
    with open(args.prior, "w") as f:
        json.dump(data, f, indent=1)
    print(f"{len(stamps)} options stamped in {args.prior}")


if __name__ == "__main__":
    main()
