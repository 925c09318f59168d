"""The carry rule (leap.search.settings.carry_objection): which rule keeps a request's choice from the next requests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leap.search.memory import SearchMemory
from leap.search.settings import carry_objection


def _memory(**stats) -> SearchMemory:
    memory = SearchMemory(None)
    memory.stats = {label: dict(entry) for label, entry in stats.items()}
    return memory


def test_each_rule_names_itself_in_order():
    """No fixed phase, then ``min_speedup``, then the best measured here, the rival, the challenger; each one is the
    answer where it alone fails (red when a rule is skipped or two swap places)."""
    proven = {"requests": 3, "mean": 2.0, "here": 3, "last": 3}
    assert carry_objection(None, 1.0, None, "a", was_carried=False, rival=None) == "no fixed phase"
    assert carry_objection(0.9, 1.0, None, "a", was_carried=False, rival=None) == "below min_speedup"
    assert carry_objection(1.5, 1.0, None, "a", was_carried=False, rival=9.0) == ""  # no memory: the speedup alone
    best_elsewhere = _memory(a=proven, b={"requests": 3, "mean": 9.0, "here": 3, "last": 3})
    assert carry_objection(1.5, 1.0, best_elsewhere, "a", was_carried=False, rival=None) == \
        "below the best measured here"
    once = _memory(a={"requests": 1, "mean": 1.5, "here": 1, "last": 1})
    assert carry_objection(1.5, 1.0, once, "a", was_carried=False, rival=1.6) == "below a rival trial"
    assert carry_objection(1.7, 1.0, once, "a", was_carried=False, rival=1.6) == ""  # it beat the rival
    assert carry_objection(1.5, 1.0, _memory(a=proven), "a", was_carried=False, rival=9.0) == ""  # proven here
    challenged = _memory(a=proven, b={"requests": 1, "mean": 5.0, "here": 1, "last": 3})
    assert carry_objection(2.0, 1.0, challenged, "a", was_carried=True, rival=None) == \
        "an option remembered above it"
    assert carry_objection(2.0, 1.0, challenged, "a", was_carried=False, rival=None) == ""  # a new carry


def test_the_prior_alone_does_not_exempt_a_choice_from_its_rival():
    """An option the shipped prior counts (``here`` 0) is judged as one this machine never measured (red when any
    counted mean exempts it: a lucky ``gated`` carried at 0.79 of ``lowbit``, docs/data/regret-amd-e75bfc1)."""
    prior = _memory(a={"requests": 2, "mean": 2.0, "here": 0, "last": 0})
    assert carry_objection(1.5, 1.0, prior, "a", was_carried=False, rival=1.6) == "below a rival trial"


@given(speedup=st.one_of(st.none(), st.floats(0.0, 10.0)), rival=st.one_of(st.none(), st.floats(0.0, 10.0)),
       carried=st.booleans())
def test_without_a_memory_only_the_speedup_decides(speedup, rival, carried):
    """Property: with no memory the answer depends on the fixed phase's speedup alone."""
    why = carry_objection(speedup, 1.0, None, "a", was_carried=carried, rival=rival)
    assert why == ("no fixed phase" if speedup is None else "below min_speedup" if speedup < 1.0 else "")


@pytest.mark.parametrize("label", [None, "a"])
def test_a_layer_configuration_is_judged_without_an_option_mean(label):
    """A fixed layer configuration (no option label) is judged by its own speedup against the best here."""
    memory = _memory(b={"requests": 3, "mean": 1.2, "here": 3, "last": 3})
    assert carry_objection(1.5, 1.0, memory, label, was_carried=False, rival=None) == ""
    assert carry_objection(1.0, 1.0, memory, label, was_carried=False, rival=None) == "below the best measured here"
