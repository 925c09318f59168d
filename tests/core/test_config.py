from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leap.core.config import LayerAction, LayerConfig, parse_layer_list
from leap.core.errors import ConfigError

actions = st.lists(st.sampled_from(list(LayerAction)), min_size=1, max_size=40).filter(
    lambda a: any(x is not LayerAction.SKIP for x in a)
)


@given(actions)
def test_string_form_round_trips(acts):
    config = LayerConfig(tuple(acts))
    assert LayerConfig.parse(str(config)) == config
    assert LayerConfig.parse(str(config), len(acts)) == config
    assert hash(LayerConfig.parse(str(config))) == hash(config)


@given(actions)
def test_sparse_form_round_trips(acts):
    config = LayerConfig(tuple(acts))
    skip = ",".join(map(str, config.skipped))
    repeat = ",".join(map(str, config.repeated))
    low = ",".join(map(str, config.low))
    assert LayerConfig.parse(f"skip={skip};repeat={repeat};low={low}", config.num_layers) == config


def test_one_action_per_layer_in_the_sparse_form():
    with pytest.raises(ConfigError, match=r"layers \[2\] are in both skip and low"):
        LayerConfig.parse("skip=1,2;low=2-3", 6)
    assert str(LayerConfig.parse("skip=1;repeat=5;low=2-3", 6)) == "ESQQER"
    assert LayerConfig.parse("EQQE").low == (1, 2) and LayerConfig.parse("EQQE").exact_prefix == 1


@given(actions)
def test_layer_passes_and_exact_prefix(acts):
    config = LayerConfig(tuple(acts))
    assert config.layer_passes == sum(a.passes for a in acts)
    assert config.layer_ratio == pytest.approx(config.layer_passes / len(acts))
    p = config.exact_prefix
    assert all(a is LayerAction.EXECUTE for a in acts[:p])
    assert p == len(acts) or acts[p] is not LayerAction.EXECUTE


def test_from_sets_and_ranges():
    config = LayerConfig.parse("skip=1-3;repeat=5", 6)
    assert str(config) == "ESSSER"
    assert parse_layer_list("5,6,9-11") == [5, 6, 9, 10, 11]
    assert LayerConfig.full(3).is_full


@pytest.mark.parametrize(
    "text, n, message",
    [
        ("EEX", None, "unknown layer action"),
        ("SSS", None, "skips every layer"),
        ("EEE", 4, "has 3 actions but the model has 4"),
        ("skip=1", None, "needs num_layers"),
        ("skip=9", 4, "layers 0..3"),
        ("skip=1;repeat=1", 4, "in both skip and repeat"),
        ("jump=1", 4, "unknown key"),
        ("skip=a", 4, "bad layer list"),
        ("", None, "one action per layer"),
    ],
)
def test_bad_configs_name_the_problem(text, n, message):
    with pytest.raises(ConfigError, match=message):
        LayerConfig.parse(text, n)


def test_check_num_layers():
    with pytest.raises(ConfigError, match="exactly one action per layer"):
        LayerConfig.full(3).check_num_layers(5)


def test_actions_must_be_layer_actions():
    with pytest.raises(ConfigError):
        LayerConfig(("E", "S"))  # type: ignore[arg-type]
