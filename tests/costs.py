"""A hand-made :class:`~leap.core.decoding.calibrate.Calibration` for tests that need costs but not a measurement.

The numbers are a test's assumptions, not any machine's: a verification curve ``c(k) = 1 + 0.05 (k - 1)``,
a layer pass 1/40 of a step, 0.1 per token for the LM head, 0.01 per step for every drafter.
"""

from leap.core.runtime.costs import Calibration


def fake_costs(num_layers: int = 6, drafters=("prompt-lookup", "suffix", "token-recycling", "gated")) -> Calibration:
    return Calibration(
        key={"model": "test"}, step_s=0.01, verify_curve={k: 1.0 + 0.05 * (k - 1) for k in range(1, 17)},
        layer_cost=1.0 / 40, head_cost=0.1, drafter_overhead={d: 0.01 for d in drafters},
        draft_curve={n: 0.1 + n / 40 for n in range(1, num_layers + 1)},
    )
