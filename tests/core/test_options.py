"""The one NAME:key=value parser (leap.core.options) every flag and option string goes through."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leap.core.errors import SettingsError
from leap.core.options import parse_assignments, parse_spec, parse_value

names = st.from_regex(r"[a-z][a-z0-9\-]{0,12}", fullmatch=True)
values = st.one_of(st.integers(-1000, 1000), st.booleans(), st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True))


@given(name=names, kwargs=st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), values, max_size=4),
       sep=st.sampled_from([",", "&"]))
def test_spec_round_trip(name, kwargs, sep):
    text = name + (":" + sep.join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in kwargs.items())
                   if kwargs else "")
    assert parse_spec(text, separator=sep) == (name, kwargs)


def test_values_are_json_else_strings():
    assert parse_value("4") == 4 and parse_value("0.5") == 0.5 and parse_value("[0.75,0.95]") == [0.75, 0.95]
    assert parse_value("true") is True and parse_value(" suffix ") == "suffix"


def test_one_assignment_keeps_commas_in_values():
    assert parse_spec("leap:ratio_band=[0.75,0.95]", separator=None) == ("leap", {"ratio_band": [0.75, 0.95]})


@pytest.mark.parametrize("bad", ["k", "=4", "a=1,b"])
def test_malformed_assignments_name_the_flag(bad):
    with pytest.raises(SettingsError, match="--policy-arg"):
        parse_assignments(bad.split(","), "--policy-arg")


def test_a_spec_needs_a_name():
    with pytest.raises(SettingsError, match="needs a name"):
        parse_spec(":k=1")
