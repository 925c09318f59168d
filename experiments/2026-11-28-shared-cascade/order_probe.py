"""What one draft step of ``lowbit`` and of ``cascade`` measures, by the order they draft in, with and without one
shared low-bit runner: the search's trials, one step each, in miniature.

For each order (e.g. ``lowbit,lowbit,cascade,cascade``) and each mode (``apart``: cascade's low-bit part keeps its own
llama.cpp context, as before; ``shared``: it takes over the lowbit option's, as the search does now) a new request of
the default model: the prompt, four plain steps (the median of the last three is ``t_base``), then one step per
drafter in the order given, each rewarded as a trial is (``committed * t_base / step time``). Prints one JSON line per
request. Usage::

    python experiments/2026-11-28-shared-cascade/order_probe.py --orders lowbit,lowbit,cascade,cascade --reps 4
"""

from __future__ import annotations

import argparse
import json
import statistics

from leap.core import SelfSpecDecoder, load_model
from leap.core.drafters import make_drafter

PROMPT = "Write a detailed essay about the history of the printing press in Europe."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", nargs="+", default=["lowbit,lowbit,cascade,cascade", "cascade,cascade,lowbit,lowbit"])
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()
    model = load_model("smollm2")
    for order in args.orders:
        for mode in ("apart", "shared"):
            for rep in range(args.reps):
                session = SelfSpecDecoder(model, None).start(PROMPT, max_new_tokens=128, chat=True)
                made = {"lowbit": make_drafter("lowbit", num_tokens=6), "cascade": make_drafter("cascade")}
                session.attach(made["lowbit"])
                if mode == "shared":
                    made["cascade"].share_state(made["lowbit"].state_owner())
                session.attach(made["cascade"])
                base = [session.step(None, drafter=None).time_s for _ in range(4)]
                t_base = statistics.median(base[1:])
                steps = [session.step(None, drafter=made[name]) for name in order.split(",")]
                print(json.dumps({"order": order, "mode": mode, "rep": rep, "t_base_ms": round(t_base * 1e3, 1),
                                  "rewards": [round(s.committed * t_base / s.time_s, 2) for s in steps],
                                  "step_ms": [round(s.time_s * 1e3) for s in steps]}), flush=True)


if __name__ == "__main__":
    main()
