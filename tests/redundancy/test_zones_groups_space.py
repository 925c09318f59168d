"""Property tests of LEAP's zones, groups and search space (pure numpy, milliseconds each)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from leap.core.config import LayerAction
from leap.core.errors import ConfigError
from leap.redundancy import (
    ZONE_ACTIONS, SearchSpace, Zone, ZoneSettings, assign_zones, build_search_space, leap_groups, smooth_zones,
)
from leap.redundancy.zones import segments

floats = st.floats(-2.0, 5.0, allow_nan=False, allow_infinity=False)


@st.composite
def metric_vectors(draw, min_layers=1, max_layers=40):
    n = draw(st.integers(min_layers, max_layers))
    R = draw(st.lists(st.floats(0.0, 5.0, allow_nan=False), min_size=n, max_size=n))
    D = draw(st.lists(floats, min_size=n, max_size=n))
    return np.array(R), np.array(D)


settings_st = st.builds(
    ZoneSettings,
    r_percentile=st.floats(0, 100),
    ear_percentile=st.floats(0, 100),
    n_early=st.integers(0, 4),
    n_final=st.integers(0, 3),
    min_segment=st.integers(1, 3),
)


@given(metric_vectors(), settings_st)
def test_zones_cover_every_layer_and_respect_forced_layers_and_segment_length(vectors, settings):
    R, D = vectors
    L = len(R)
    zones = assign_zones(R, D, settings)
    assert len(zones) == L and all(isinstance(z, Zone) for z in zones)
    n_early = min(settings.n_early, L)
    n_final = min(settings.n_final, L - n_early)
    assert all(z is Zone.EARLY for z in zones[:n_early])
    assert all(z is Zone.FINAL for z in zones[L - n_final:])
    forced = set(range(n_early)) | set(range(L - n_final, L))
    segs = segments(zones)
    assert [l for s in segs for l in range(s[0], s[1])] == list(range(L))  # contiguous segments, in order
    for start, stop, zone in segs:
        if len(segs) > 1 and zone is not Zone.EARLY and not forced & set(range(start, stop)):
            assert stop - start >= settings.min_segment


@given(metric_vectors(min_layers=6))
def test_final_candidates_only_from_a_quarter_of_the_depth(vectors):
    R, D = vectors
    settings = ZoneSettings(min_segment=1)  # no smoothing: see the raw candidates
    zones = assign_zones(R, D, settings)
    L = len(R)
    for l, z in enumerate(zones[: L - settings.n_final]):
        if z is Zone.FINAL:
            assert l >= max(settings.n_early, L // 4)


def test_tie_between_early_and_final_goes_to_the_larger_normalised_score():
    L = 12
    R = np.ones(L)
    D = np.zeros(L)
    R[6], D[6] = 3.0, 1.0  # R/r_thr = 3 vs D/ear_thr = 1/0 -> huge: final wins
    zones = assign_zones(R, D, ZoneSettings(min_segment=1))
    assert zones[6] is Zone.FINAL
    R[6], D[6] = 30.0, 1e-12
    zones = assign_zones(R, D, ZoneSettings(min_segment=1, ear_percentile=50))
    assert zones[6] is Zone.EARLY


def test_smoothing_merges_short_segments_but_protects_early():
    E, M, F = Zone.EARLY, Zone.MIDDLE, Zone.FINAL
    assert smooth_zones([E, E, M, M, F, M, M, F, F]) == [E, E, M, M, M, M, M, F, F]
    assert smooth_zones([E, E, M, M, E, M, M, F, F]) == [E, E, M, M, E, M, M, F, F]


@given(metric_vectors(min_layers=3))
def test_groups_partition_each_zone_in_layer_order(vectors):
    R, D = vectors
    zones = assign_zones(R, D)
    groups = leap_groups(zones, R, D)
    assert [l for g in groups for l in g] == list(range(len(R)))
    for g in groups:
        assert g == list(range(g[0], g[-1] + 1))
        assert len({zones[l] for l in g}) == 1
        if zones[g[0]] is Zone.MIDDLE:
            assert len(g) <= max(3, sum(z is Zone.MIDDLE for z in zones) // 6)
        if zones[g[0]] is Zone.FINAL:
            assert len(g) <= max(2, sum(z is Zone.FINAL for z in zones) // 4)
    early_segments = [s for s in segments(zones) if s[2] is Zone.EARLY]
    assert all(list(range(s[0], s[1])) in groups for s in early_segments)


@given(metric_vectors(min_layers=2, max_layers=30), st.booleans(), st.booleans(), st.integers(0, 2**32 - 1))
def test_space_configs_obey_zone_actions_and_sampling_is_valid(vectors, zones_on, groups_on, seed):
    R, D = vectors
    space = build_search_space(R, D, zones=zones_on, groups=groups_on)
    rng = np.random.default_rng(seed)
    for _ in range(10):
        choice = space.sample(rng)
        assert space.is_valid(choice)
        config = space.to_config(choice)
        assert config.num_layers == len(R)
        for unit, a in zip(space.units, choice):
            action = unit.actions[a]
            assert action in ZONE_ACTIONS[unit.zone]
            layer_actions = [config.actions[l] for l in unit.layers]
            if action is LayerAction.SKIP and len(unit.layers) > 1:
                assert layer_actions[0] is LayerAction.EXECUTE
            for l in unit.layers:
                allowed = set(ZONE_ACTIONS[unit.zone])
                assert config.actions[l] in allowed
        assert space.from_config(config) == choice
    assert space.to_config(space.full_choice).is_full
    if not zones_on:
        assert all(z is Zone.MIDDLE for z in space.zones)
    if not groups_on:
        assert all(len(u.layers) == 1 for u in space.units)


@given(metric_vectors(min_layers=1, max_layers=12), st.booleans(), st.booleans())
def test_space_size_matches_enumeration(vectors, zones_on, groups_on):
    R, D = vectors
    space = build_search_space(R, D, zones=zones_on, groups=groups_on)
    choices = list(space.enumerate())
    assert len(choices) == space.size()
    assert len({space.to_config(c) for c in choices}) == len(choices)


def test_bad_choices_name_the_problem():
    space = build_search_space(np.ones(8), np.zeros(8))
    with pytest.raises(ConfigError, match="one action per decision unit"):
        space.to_config((0,))
    with pytest.raises(ConfigError, match="out of range"):
        space.to_config((5,) * len(space.units))
    middle_only = build_search_space(np.ones(3), np.zeros(3), zones=False, groups=False)
    with pytest.raises(ConfigError, match="skips every layer"):
        middle_only.to_config((1, 1, 1))
    assert not middle_only.is_valid((1, 1, 1)) and middle_only.size() == 7


def test_units_must_cover_layers_in_order():
    from leap.redundancy import DecisionUnit

    with pytest.raises(ConfigError, match="cover layers"):
        SearchSpace([DecisionUnit((1,), Zone.MIDDLE, ZONE_ACTIONS[Zone.MIDDLE])])


def test_the_r_role_moves_middle_group_cuts_as_the_docs_say():
    """Issue 36: the docs gave the group cuts to --group-metric alone; LEAP's spike rule also cuts a middle-zone
    group where R jumps by 30% - the same Delta L with one R jump gives other groups."""
    from leap.redundancy.groups import leap_groups
    from leap.redundancy.zones import Zone

    zones = [Zone.EARLY] * 2 + [Zone.MIDDLE] * 8 + [Zone.FINAL] * 2
    delta_l = np.full(12, 0.01)
    flat = np.full(12, 0.5)
    jump = flat.copy()
    jump[5] = 0.9  # a 30%+ jump at layer 5
    assert leap_groups(zones, flat, delta_l) != leap_groups(zones, jump, delta_l)
    assert any(g[0] == 5 for g in leap_groups(zones, jump, delta_l))
