"""UCB1 (leap.core.ucb1), shared by the ucb agent and the bandit draft policy."""

import math

import numpy as np

from leap.core.ucb1 import ucb1_choice


def test_untried_arms_first_in_order():
    assert ucb1_choice([1, 0, 0], [5.0, 0.0, 0.0], c=1.0) == 1
    assert ucb1_choice([1, 1, 0], [5.0, 0.0, 0.0], c=1.0) == 2


def test_the_index_is_mean_plus_exploration_bonus():
    counts, sums, c = [10, 2], [9.0, 1.0], 0.5
    index = [s / n + c * math.sqrt(2 * math.log(12) / n) for s, n in zip(sums, counts)]
    assert ucb1_choice(counts, sums, c) == int(np.argmax(index))
    assert ucb1_choice(counts, sums, 0.0) == 0  # no exploration: the best mean


def test_a_bandit_finds_the_best_arm():
    rng = np.random.default_rng(0)
    means = [0.2, 0.5, 0.8]
    counts, sums = [0, 0, 0], [0.0, 0.0, 0.0]
    for _ in range(500):
        arm = ucb1_choice(counts, sums, 0.5, rng)
        counts[arm] += 1
        sums[arm] += float(rng.random() < means[arm])
    assert counts[2] > 300


def test_an_arm_that_does_not_explore_competes_with_its_mean_alone():
    from leap.core.ucb1 import ucb1_choice

    counts, sums = [50, 1], [50 * 0.9, 0.8]  # arm 1: a lower mean, pulled once (a large exploration term)
    assert ucb1_choice(counts, sums, 0.2) == 1
    assert ucb1_choice(counts, sums, 0.2, explores=[True, False]) == 0
