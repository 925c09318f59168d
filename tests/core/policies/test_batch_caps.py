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


def test_drafter_arms_pair_every_drafter_with_every_cap_and_keep_one_plain_arm():
    from leap.core.policies.batch_caps import GoodputBandit, drafter_arms

    assert drafter_arms(2, (0, 16, 4)) == [(0, 0), (0, 4), (1, 4), (0, 16), (1, 16)]  # plain, then short caps first
    assert drafter_arms(1, (4,)) == [(0, 4)]
    bandit = GoodputBandit(drafter_arms(2, (0, 4)))
    pulls = []
    for _ in range(150):
        arm = bandit.choose()
        pulls.append(arm)
        bandit.update(arm, committed={(0, 0): 10, (0, 4): 12, (1, 4): 18}[arm], seconds=1.0)
    assert pulls[-50:].count((1, 4)) > 40


def test_a_seeded_bandit_holds_each_tried_arms_mean_as_one_pull():
    from leap.core.policies.batch_caps import GoodputBandit

    bandit = GoodputBandit((0, 2, 4), horizon=0)
    for cap, goodput in ((0, 10.0), (0, 12.0), (4, 20.0)):
        bandit.update(cap, committed=goodput, seconds=1.0)
    seeded = bandit.seeded()
    assert seeded.counts == [1, 0, 1] and seeded.means() == {0: 11.0, 4: 20.0}
    assert seeded.choose() == 2  # the untried arm first, as in a new bandit


def test_an_arms_goodput_is_its_tokens_over_its_seconds_not_a_mean_of_step_ratios():
    from leap.core.policies.batch_caps import GoodputBandit

    bandit = GoodputBandit((2, 4), horizon=0)
    bandit.update(4, committed=10, seconds=1.0)  # one quick step that committed much, one slow that committed none:
    bandit.update(4, committed=0, seconds=9.0)  # 10 tokens in 10 s (a mean of step ratios says 5 a second)
    bandit.update(2, committed=2, seconds=1.0)
    assert bandit.means() == {2: 2.0, 4: 1.0}


def test_a_drafters_longer_cap_is_tried_only_where_its_shorter_cap_did_as_well_as_plain():
    from leap.core.policies.batch_caps import GoodputBandit, drafter_arms

    goodput = {(0, 0): 10, (0, 4): 6, (0, 16): 30, (1, 4): 14, (1, 16): 20}  # drafter 0 loses at 4 tokens
    bandit = GoodputBandit(drafter_arms(2, (0, 4, 16)))
    pulls = []
    for _ in range(100):
        arm = bandit.choose()
        pulls.append(arm)
        bandit.update(arm, committed=goodput[arm], seconds=1.0)
    assert (0, 16) not in pulls  # its rung below lost to plain: never explored
    assert pulls[:4] == [(0, 0), (0, 4), (1, 4), (1, 16)] and pulls[-50:].count((1, 16)) > 40
    single = GoodputBandit((0, 2, 4, 8))  # one drafter: the same ladder over its caps
    for cap, value in ((0, 10), (2, 12), (4, 9)):
        single.update(cap, committed=value, seconds=1.0)
    assert single._open(2) and not single._open(3)  # 8 waits: 4 did worse than plain


def test_an_arms_value_follows_its_recent_steps_so_a_drafter_that_stops_paying_is_left():
    from leap.core.policies.batch_caps import GoodputBandit

    def after_change(horizon):  # cap 4 copies a passage at first (30 a step), then the text moves on (5 a step)
        bandit = GoodputBandit((0, 4), horizon=horizon)
        for _ in range(40):
            bandit.update(4, committed=30, seconds=1.0)
        bandit.update(0, committed=10, seconds=1.0)
        pulls = []
        for _ in range(100):
            arm = bandit.choose()
            pulls.append(arm)
            bandit.update(arm, committed={0: 10, 4: 5}[arm], seconds=1.0)
        return pulls[-50:].count(0)

    assert after_change(8) > 40
    assert after_change(0) < 10  # an all-time ratio keeps the stale arm (what the discount is for)
    with pytest.raises(SettingsError, match="horizon"):
        GoodputBandit((0, 4), horizon=-1)


def _geometric(alpha: float, cap: int) -> float:
    return sum(alpha ** i for i in range(1, cap + 1))


def test_the_screen_reads_a_drafters_acceptance_as_the_geometric_rate_its_pulled_caps_measured():
    from leap.core.policies.batch_caps import GoodputBandit, drafter_arms

    bandit = GoodputBandit(drafter_arms(2, (0, 2, 4, 8)), verify_cost=lambda q: 1.0, horizon=0)
    for _ in range(3):
        bandit.update((0, 2), committed=1 + _geometric(0.8, 2), seconds=1.0, accepted=_geometric(0.8, 2), draft_s=0.1)
    bandit.update((0, 4), committed=1 + _geometric(0.8, 4), seconds=1.0, accepted=_geometric(0.8, 4), draft_s=0.2)
    bandit.update((1, 2), committed=1.0, seconds=1.0, accepted=0.0, draft_s=0.1)
    assert bandit.acceptance((0, 8)) == pytest.approx(0.8, abs=1e-6)
    assert bandit.acceptance((1, 8)) == pytest.approx(0.0, abs=1e-6)  # another drafter's steps are its own
    bandit.update((0, 0), committed=1.0, seconds=0.5)  # a plain step: 0.5 s
    # cap 8: 1 + a(8) tokens over a plain step's 0.5 s x verify_cost (flat) + 8 positions x 0.05 s each
    assert bandit.predict((0, 8)) == pytest.approx((1 + _geometric(0.8, 8)) / (0.5 + 8 * 0.05))


def test_the_screen_opens_the_caps_the_cost_model_says_pay_and_closes_the_ones_it_says_lose():
    from leap.core.policies.batch_caps import GoodputBandit, drafter_arms

    def first_pulls(verify_cost, accepted, bar="plain"):  # plain 1 token a row in 1 s; cap 2 beat it by noise
        bandit = GoodputBandit(drafter_arms(1, (0, 2, 4, 8)), verify_cost=verify_cost, bar=bar)
        bandit.update((0, 0), committed=1.0, seconds=1.0)
        bandit.update((0, 2), committed=1.0 + accepted, seconds=1.0, accepted=accepted, draft_s=0.02)
        return {arm for arm in bandit.caps if bandit._open(bandit.caps.index(arm))}

    # nothing accepted at cap 2, yet its one step's clock said 1.05 tokens a second: the ladder would open cap 4
    assert first_pulls(lambda q: 1.0 + 0.1 * (q - 1), accepted=0.05) == {(0, 0), (0, 2)}
    # almost everything accepted, verification nearly flat: caps 4 and 8 open at once (8 without 4 pulled)
    assert first_pulls(lambda q: 1.0 + 0.02 * (q - 1), accepted=1.9) == {(0, 0), (0, 2), (0, 4), (0, 8)}
    # half the acceptance (alpha 0.62) where each verified token costs a quarter step: 4 pays (2.38 tokens in 2.04 s),
    # 8 does not (2.58 in 3.08 s)
    assert first_pulls(lambda q: 1.0 + 0.25 * (q - 1), accepted=1.0) == {(0, 0), (0, 2), (0, 4)}
    # the same against the best arm (the default bar): cap 2 is predicted at 2.0 tokens in 1.52 s, above cap 4
    assert first_pulls(lambda q: 1.0 + 0.25 * (q - 1), accepted=1.0, bar="best") == {(0, 0), (0, 2)}
    assert first_pulls(lambda q: 1.0 + 0.02 * (q - 1), accepted=1.9, bar="best") == {(0, 0), (0, 2), (0, 4), (0, 8)}
    ladder = GoodputBandit(drafter_arms(1, (0, 2, 4, 8)))  # without the screen: the ladder's rule, as before
    ladder.update((0, 0), committed=1.0, seconds=1.0)
    ladder.update((0, 2), committed=1.05, seconds=1.0)
    assert ladder._open(2) and not ladder._open(3)


def test_a_seeded_bandit_keeps_the_screens_statistics_and_takes_the_new_row_counts_costs():
    from leap.core.policies.batch_caps import GoodputBandit

    bandit = GoodputBandit((0, 2, 8), verify_cost=lambda q: 1.0, horizon=0)
    bandit.update(0, committed=1.0, seconds=1.0)
    for _ in range(4):
        bandit.update(2, committed=1.0 + _geometric(0.9, 2), seconds=1.0, accepted=_geometric(0.9, 2), draft_s=0.1)
    seeded = bandit.seeded(lambda q: 1.0 + 0.6 * (q - 1))  # more rows: verification dearer
    assert seeded.acceptance(8) == pytest.approx(0.9, abs=1e-6)
    assert bandit._open(2) and not seeded._open(2)  # cap 8 pays at the old row count, not at the new one


def test_the_goodput_bandit_keeps_exploring_an_arm_that_lost_early():
    """Issue 54: arms are non-stationary (rows leave, a drafter stops copying), so a losing arm must still be pulled
    now and then - red when the exploration term is dropped and the bandit pulls the first winner for ever."""
    from leap.core.policies.batch_caps import GoodputBandit

    bandit = GoodputBandit((0, 4), horizon=8)
    pulls = []
    for step in range(300):
        cap = bandit.choose()
        pulls.append(cap)
        later = step >= 150  # the drafter starts to pay halfway
        bandit.update(cap, committed={0: 10, 4: 14 if later else 9}[cap], seconds=1.0)
    assert 0 < pulls[:150].count(4) < 75  # explored while losing, not chosen
    assert pulls[-50:].count(4) > 40  # so the change was found


def test_a_new_row_count_starts_from_the_closest_remembered_one_ties_to_the_fewer_rows(tiny_llama):
    """Issue 54: which remembered row count seeds a new one (red when it is the first or the last remembered)."""
    from leap.core.decoding.batch import BatchDecoder
    from leap.core.policies.batch_caps import GoodputBandit

    def seeded_at(rows):
        decoder = BatchDecoder(tiny_llama, "prompt-lookup", num_tokens="auto", screen=False)
        for remembered, goodput in ((2, 20.0), (8, 80.0), (4, 40.0)):
            bandit = GoodputBandit((0, 2, 4, 8))
            bandit.update(0, committed=goodput, seconds=1.0)
            decoder._policies[remembered] = bandit
        return decoder.policy(rows).means()[0]

    assert seeded_at(3) == 20.0  # 2 and 4 both one away: the fewer rows
    assert seeded_at(6) == 40.0  # 4 and 8 both two away: the fewer rows
    assert seeded_at(7) == 80.0 and seeded_at(12) == 80.0  # 8 the closest


def test_an_arm_pays_only_with_accepted_drafts_and_at_least_plain_goodput():
    from leap.core.policies.batch_caps import GoodputBandit

    bandit = GoodputBandit([(0, 0), (0, 4), (1, 4)])
    bandit.update((0, 4), committed=3.0, seconds=1.0, accepted=2.0)
    assert not bandit.pays()  # plain decoding not measured yet: nothing to pay against
    bandit.update((0, 0), committed=1.0, seconds=0.5)  # plain: 2 tokens a second
    assert bandit.pays()  # 3 tokens a second, drafts accepted
    lucky = GoodputBandit([(0, 0), (1, 4)])
    lucky.update((0, 0), committed=1.0, seconds=0.5)
    lucky.update((1, 4), committed=1.0, seconds=0.4, accepted=0.0)  # faster by the clock alone, nothing accepted
    assert not lucky.pays()
    slow = GoodputBandit([(0, 0), (1, 4)])
    slow.update((0, 0), committed=1.0, seconds=0.5)
    slow.update((1, 4), committed=1.5, seconds=1.0, accepted=0.5)  # accepted, but 1.5 tokens a second
    assert not slow.pays()


def test_the_screen_opens_an_untried_cap_only_where_it_is_predicted_to_beat_the_best_arm_so_far():
    """An untried arm is pulled as soon as it opens, so the screen's bar is the best pulled arm as the cost model
    predicts it, not plain decoding: a drafter a little above plain (a copy now and then) keeps its longer caps closed
    while another pays twice plain - red with the bar at plain (``bar="plain"``, the ablation, opens its cap 4)."""
    from leap.core.policies.batch_caps import GoodputBandit, drafter_arms

    def opened(bar):
        bandit = GoodputBandit(drafter_arms(2, (0, 2, 4, 8)), verify_cost=lambda q: 1.0 + 0.05 * (q - 1), bar=bar)
        bandit.update((0, 0), committed=1.0, seconds=1.0)  # plain: 1 token a row a second
        bandit.update((1, 2), committed=2.5, seconds=1.0, accepted=1.5, draft_s=0.05)  # drafter 1: 2.2 predicted
        bandit.update((0, 2), committed=1.3, seconds=1.0, accepted=0.3, draft_s=0.0)  # drafter 0: 1.1 at cap 4
        assert 1.0 < bandit.predict((0, 4)) < bandit.predict((1, 2)) < bandit.predict((1, 4))
        return {arm for arm in bandit.caps if bandit._open(bandit.caps.index(arm))}

    assert opened("best") == {(0, 0), (0, 2), (1, 2), (1, 4), (1, 8)}
    assert opened("plain") == opened("best") | {(0, 4)}
    with pytest.raises(SettingsError, match="bar"):
        GoodputBandit((0, 2), bar="worst")


def test_mid_batch_a_drafter_not_yet_begun_is_switched_to_on_its_value_alone_and_never_first_tried():
    """Beginning a drafter's rows in a batch costs time a step's goodput leaves out: once one drafter is begun, the
    others' tried arms get no exploration term (red with ``switching=False``); an untried arm is still tried at once."""
    from leap.core.policies.batch_caps import GoodputBandit, drafter_arms

    def pulls(begun, switching=True, other=14.0):  # switching is off by default: on here, then the default
        bandit = GoodputBandit(drafter_arms(3, (0, 4)), switching=switching)
        goodput = {(0, 0): 10.0, (0, 4): 18.0, (1, 4): other, (2, 4): 5.0}  # drafter 2: untried, and a loser
        for arm in ((0, 0), (0, 4), (0, 4), (1, 4)):
            bandit.update(arm, committed=goodput[arm], seconds=1.0)
        out = []
        for _ in range(60):
            arm = bandit.choose(begun)
            out.append(arm)
            bandit.update(arm, committed=goodput[arm], seconds=1.0)
        return out

    mid = pulls({0})
    assert mid[0] == (2, 4) and (1, 4) not in mid  # the untried arm at once; drafter 1 loses on its value alone
    assert (2, 4) not in mid[1:]  # tried and lost: not explored again mid-batch
    assert pulls({0}, other=30.0)[1] == (1, 4)  # one not begun whose value beats the begun arms' bounds: switched to
    assert (1, 4) in pulls(set()) and (1, 4) in pulls({0, 1})  # at a batch's first drafting step, or begun: explored
    free = pulls({0}, switching=GoodputBandit((0,)).switching)
    assert (1, 4) in free  # the ablation: everything explores at every step
    # the best arm belongs to a drafter not begun (a loser was begun first): it keeps its exploration term, and wins
    bandit = GoodputBandit(drafter_arms(2, (0, 4)), switching=True)
    for arm, tokens in (((0, 0), 10.0), ((0, 4), 14.0), ((1, 4), 17.0), ((1, 4), 17.0)):
        bandit.update(arm, committed=tokens, seconds=1.0)
    assert bandit.choose({0}) == (1, 4)


def test_a_retired_drafters_arms_are_never_pulled_and_a_seeded_bandit_keeps_them_closed():
    """Retiring a drafter (the search's memory pruned it) closes its arms, however well they did - even untried
    ones and the best so far - while plain decoding's arm and the other drafters' stay open; a later call that
    leaves it out opens them again. Red when :meth:`GoodputBandit._open` ignores ``retired``."""
    from leap.core.policies.batch_caps import GoodputBandit, drafter_arms

    goodput = {(0, 0): 10, (0, 2): 30, (0, 4): 40, (1, 2): 12, (1, 4): 11}
    bandit = GoodputBandit(drafter_arms(2, (0, 2, 4)))
    for _ in range(20):
        arm = bandit.choose()
        bandit.update(arm, committed=goodput[arm], seconds=1.0)
    bandit.retire({0})
    pulled = []
    for _ in range(60):
        arm = bandit.choose()
        pulled.append(arm)
        bandit.update(arm, committed=goodput[arm], seconds=1.0)
    assert not [a for a in pulled if a[0] == 0 and a[1] > 0] and {(0, 0), (1, 2)} <= set(pulled)
    seeded = bandit.seeded()  # a new row count's bandit
    assert seeded.retired == {0}
    for _ in range(10):
        arm = seeded.choose()
        assert arm[0] != 0 or arm[1] == 0
        seeded.update(arm, committed=goodput[arm], seconds=1.0)
    bandit.retire(set())
    assert bandit.choose() in {(0, 2), (0, 4)}  # back: its arms, the best so far, lead again


def test_plain_decoding_is_measured_again_so_a_bar_measured_under_load_does_not_stand():
    """Plain's goodput is the bar every arm is judged by; measured while the machine was loaded (half its speed) and
    not pulled since, it made a drafting arm that runs at 0.8 of plain look 1.6 times plain for good. Red when the
    bandit does not pull plain again (``refresh=0``, or a refresh that does not age the stale steps)."""
    from leap.core.policies.batch_caps import GoodputBandit

    def after_load(refresh):
        bandit = GoodputBandit((0, 4), refresh=refresh)
        for _ in range(8):  # plain pulled in a loaded stretch: 5 tokens a second
            bandit.update(0, committed=5, seconds=1.0)
        for _ in range(8):  # the load gone, the drafting arm: 8 (plain would give 10)
            bandit.update(4, committed=8, seconds=1.0)
        pulls = []
        for _ in range(200):  # the load goes: plain 10, the drafting arm 8
            arm = bandit.choose()
            pulls.append(arm)
            bandit.update(arm, committed={0: 10, 4: 8}[arm], seconds=1.0)
        return pulls[-100:].count(0)

    assert after_load(32) > 85
    assert after_load(0) < 15  # the stale bar: the drafting arm for good
    # what plain measured 100 steps ago gives way to its next pull in the sums too (the bar of fresh_bar=False)
    aged = GoodputBandit((0, 4), refresh=32, fresh_bar=False)
    for arm, goodput, times in ((0, 5, 8), (4, 8, 100), (0, 10, 1)):
        for _ in range(times):
            aged.update(arm, committed=goodput, seconds=1.0)
    assert aged.means()[0] > 9.0  # 5.9 when only its own pulls discount it
    with pytest.raises(SettingsError, match="refresh"):
        GoodputBandit((0, 4), refresh=-1)


def test_a_refreshed_bandit_still_settles_on_the_arm_that_pays_pulling_plain_once_per_refresh():
    from leap.core.policies.batch_caps import GoodputBandit

    bandit = GoodputBandit((0, 4), refresh=32)
    pulls = []
    for _ in range(320):
        arm = bandit.choose()
        pulls.append(arm)
        bandit.update(arm, committed={0: 10, 4: 15}[arm], seconds=1.0)
    late = pulls[-160:]
    assert 12 <= late.count(0) <= 16  # three plain steps in 35: the bar's price, no more


def test_a_refresh_measures_the_bar_afresh_so_a_slow_stretchs_pulls_do_not_outweigh_it():
    """A slow stretch's eight plain pulls (0.2 s a step: 5 tokens a second) against the machine's speed a refresh later
    (0.1 s: 10): the refresh pulls plain three times and what it measures is the bar, so the drafting arm (8 tokens a
    second) is left. Red when the refresh pulls once or the bar is the discounted sums (``fresh_bar=False``: the bar
    6.2, the drafting arm kept)."""
    from leap.core.policies.batch_caps import GoodputBandit

    def after_stretch(fresh_bar):
        bandit = GoodputBandit((0, 4), refresh=32, fresh_bar=fresh_bar)
        for _ in range(8):
            bandit.update(0, committed=1, seconds=0.2)
        for _ in range(32):
            bandit.update(4, committed=1.6, seconds=0.2)
        refresh = []
        for _ in range(3):
            refresh.append(bandit.choose())
            bandit.update(refresh[-1], committed={0: 1, 4: 1.6}[refresh[-1]], seconds={0: 0.1, 4: 0.2}[refresh[-1]])
        return refresh, bandit.means()[0], bandit.choose()

    refresh, bar, then = after_stretch(True)
    assert refresh == [0, 0, 0] and bar == pytest.approx(10.0) and then == 0
    refresh, bar, then = after_stretch(False)
    assert refresh == [0, 4, 4] and bar < 7.0 and then == 4


def test_the_bar_is_robust_to_a_stray_slow_step():
    """A plain step does the same work every time; the machine now and then takes several times as long over one (the
    search's first batch at B = 8 ended on 154, 39 and 167 ms among 34-35 ms plain steps). The bar stays a usual plain
    step, so a drafting arm at 0.7 of plain is left; red when the bar is the discounted sums (1.6 times the
    usual step), or a mean over the last pulls."""
    from leap.core.policies.batch_caps import GoodputBandit

    def after_strays(fresh_bar):
        bandit = GoodputBandit((0, 4), refresh=32, fresh_bar=fresh_bar)
        for _ in range(8):
            bandit.update(4, committed=1.6, seconds=0.08)  # 20 tokens a second, plain 28.6
        for seconds in [0.035] * 20 + [0.154, 0.039, 0.167]:
            bandit.update(0, committed=1, seconds=seconds)
        return bandit.means()[0], bandit.choose()

    bar, then = after_strays(True)
    assert 0.999 / 0.039 <= bar <= 1.001 / 0.035 and then == 0  # at worst the slowest step not a stray's
    bar, then = after_strays(False)
    assert bar < 1 / 0.035 / 1.4 and then == 4


def test_a_seeded_bandit_keeps_each_arms_age_so_its_bar_is_refreshed_on_time():
    """A bandit for a new row count starts from the closest one's values; its plain arm, last pulled 30 steps ago,
    is due again two steps later, not ``refresh`` steps after the seeding (at B = 8 a row count lasts about 30 steps, so
    a bar that restarted its age at each one was never measured again within a batch), and its bar carries plain's last
    pulls. Red when the age or the pulls are dropped."""
    from leap.core.policies.batch_caps import GoodputBandit

    bandit = GoodputBandit((0, 4), refresh=32)
    bandit.update(0, committed=5, seconds=1.0)
    for _ in range(30):
        bandit.update(4, committed=8, seconds=1.0)
    seeded = bandit.seeded()
    pulls = []
    for _ in range(5):
        arm = seeded.choose()
        pulls.append(arm)
        seeded.update(arm, committed={0: 5, 4: 8}[arm], seconds=1.0)
    assert pulls == [4, 4, 0, 0, 0]
    steady = GoodputBandit((0, 4), refresh=32)  # plain's last pulls carry over: a stray step next is outvoted
    for _ in range(4):
        steady.update(0, committed=1, seconds=0.1)
    seeded = steady.seeded()
    seeded.update(0, committed=1, seconds=0.5)
    assert seeded.means()[0] == pytest.approx(10.0)
