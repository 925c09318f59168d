"""The shipped prior's reading and its rescaling to this machine (leap.search.memory.prior), on their own."""

from __future__ import annotations

import pytest

from leap.search.memory.means import FIELDS
from leap.search.memory.prior import prior_sets, rescale


def test_a_prior_counts_each_option_on_min_requests_at_most_and_as_measured_elsewhere():
    """Every set of the file is read under its own key; an entry seen on 20 requests counts as ``min_requests`` (red
    when the cap is dropped: the prior would outweigh this machine's requests), and is marked as never measured here."""
    data = {"options": {"lowbit": {"requests": 20, "mean": 2.0, "var": 0.04}},
            "long_prompts": {"suffix": {"requests": 1, "mean": 0.8, "fingerprint": "f"}}}
    sets = prior_sets(data, FIELDS, min_requests=2)
    assert set(sets) == {key for key, _ in FIELDS}
    assert sets["short"]["lowbit"] == {"requests": 2, "mean": 2.0, "var": 0.04, "last": 0, "here": 0,
                                       "fingerprint": None}
    assert sets["long"]["suffix"]["requests"] == 1 and sets["long"]["suffix"]["fingerprint"] == "f"
    assert not sets["batch"]


@pytest.mark.parametrize("measured, scale", [({"a": 1.0, "b": 0.5, "c": 3.0}, 0.5), ({"a": 2.0}, 1.0),
                                             ({"a": 1.0, "zzz": 9.0}, 0.5)])
def test_rescale_takes_the_median_ratio_of_the_options_both_know(measured, scale):
    """The median of measured over remembered, over the options both know (red with the mean, or when an option the
    prior does not know counts); every entry scaled, its variance by the square."""
    means = {"a": {"mean": 2.0, "var": 0.1}, "b": {"mean": 1.0, "var": 0.0}, "c": {"mean": 4.0}}
    assert rescale(means, measured, lambda label: True) == pytest.approx(scale)
    assert means["a"]["mean"] == pytest.approx(2.0 * scale) and means["a"]["var"] == pytest.approx(0.1 * scale ** 2)
    assert means["c"]["mean"] == pytest.approx(4.0 * scale)


def test_rescale_leaves_a_set_this_machine_has_measured_alone():
    """Once any entry was measured here the set is this machine's: nothing scaled (red when one prior entry is
    enough), and nothing where no option is shared."""
    means = {"a": {"mean": 2.0}, "b": {"mean": 1.0}}
    assert rescale(means, {"a": 1.0}, lambda label: label != "b") is None and means["a"]["mean"] == 2.0
    assert rescale(means, {"x": 1.0}, lambda label: True) is None and means["a"]["mean"] == 2.0
