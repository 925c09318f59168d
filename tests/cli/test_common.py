"""The CLI's shared model arguments (leap.cli.common)."""

from __future__ import annotations

import argparse

import pytest

from leap.cli.common import add_model_args, fast_linear_of


@pytest.mark.parametrize("argv, expected", [([], None), (["--linears", "packed"], True), (["--linears", "stock"], False),
                                            (["--no-fast-linear"], False), (["--linears", "auto"], None)])
def test_linears_flag_maps_to_load_models_fast_linear(argv, expected):
    p = argparse.ArgumentParser()
    add_model_args(p)
    assert fast_linear_of(p.parse_args(argv)) is expected
