"""The chain cap of batched decoding: the goodput bandit settles where speculation pays and turns it off where it
does not (issue 37)."""

from __future__ import annotations

import pytest

from leap.core.errors import SettingsError


def test_the_goodput_bandit_settles_on_the_cap_that_pays_and_turns_drafting_off_when_none_does():
    from leap.core.policies.batch_caps import GoodputBandit

    def run(goodput, steps=200):
        bandit = GoodputBandit((0, 2, 4, 8))
        pulls = []
        for _ in range(steps):
            cap = bandit.choose()
            pulls.append(cap)
            bandit.update(cap, committed=goodput[cap], seconds=1.0)
        return pulls

    pays = run({0: 10, 2: 14, 4: 18, 8: 12})
    assert pays[-100:].count(4) > 80
    loses = run({0: 10, 2: 8, 4: 6, 8: 3})
    assert loses[-100:].count(0) > 80
    with pytest.raises(SettingsError, match="distinct"):
        GoodputBandit((2, 2))
