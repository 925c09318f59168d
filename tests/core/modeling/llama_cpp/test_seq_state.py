"""llama.cpp's sequence state as leap reads and writes it (issue 35's KV handoff): what it writes parses back to
the same cells, what it does not know is an error (never a misread), and the float rows survive the trip.
The real format is checked against llama.cpp itself in ``test_handoff.py``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core.modeling.llama_cpp.seq_state import (MAGIC, SeqState, SeqStateError, encode, from_rows, parse,
                                                    to_rows)


def _state(cells, layers, width, v_trans, n_stream, seq, ggml_type, seed):
    rng = np.random.default_rng(seed)
    element = {0: 4, 1: 2, 30: 2}[ggml_type]
    rows = lambda: rng.integers(0, 256, (cells, width * element), dtype=np.uint8)  # noqa: E731
    return SeqState(seq=seq, n_stream=n_stream, positions=rng.permutation(cells * 2)[:cells].astype(np.int32),
                    v_trans=v_trans, k_types=[ggml_type] * layers, keys=[rows() for _ in range(layers)],
                    v_types=[ggml_type] * layers, values=[rows() for _ in range(layers)])


@settings(max_examples=40, deadline=None)
@given(cells=st.integers(1, 9), layers=st.integers(1, 4), width=st.integers(1, 6), v_trans=st.booleans(),
       n_stream=st.integers(1, 3), seq=st.integers(0, 7), ggml_type=st.sampled_from([0, 1, 30]), seed=st.integers(0, 99))
def test_what_is_written_parses_back_to_the_same_cells(cells, layers, width, v_trans, n_stream, seq, ggml_type, seed):
    """Positions, types and every row (values transposed on the wire when v_trans) come back as written (red when
    encode and parse disagree on the transposed layout or the meta of a cell)."""
    state = _state(cells, layers, width, v_trans, n_stream, seq, ggml_type, seed)
    back = parse(encode(state))
    assert (back.seq, back.n_stream, back.v_trans, back.cells) == (seq, n_stream, v_trans, cells)
    assert back.positions.tolist() == state.positions.tolist()
    assert back.k_types == state.k_types and back.v_types == state.v_types
    for a, b in zip(back.keys + back.values, state.keys + state.values):
        assert np.array_equal(a, b)


def test_the_transposed_layout_is_column_major_on_the_wire():
    """v_trans = 1: llama.cpp writes each value dimension's cells together; the second dimension of cell 0 is the
    blob's (cells + 1)-th element of the layer (red when the transpose is dropped: both sides would still agree)."""
    state = _state(3, 1, 2, True, 1, 0, 0, 0)
    state.values = [torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]).view(torch.uint8).numpy().reshape(3, -1)]
    blob = encode(state)
    tail = np.frombuffer(blob[-4 * 6:], np.float32)
    assert tail.tolist() == [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]


def test_an_empty_sequence_is_its_streams_and_nothing_else():
    blob = encode(SeqState(seq=2, n_stream=3))
    assert len(blob) == 4 * 3 + 4 * 3
    assert parse(blob).cells == 0 and parse(blob).n_stream == 3


@pytest.mark.parametrize("spoil, message", [
    (lambda b: b[:-3], "ends early"),
    (lambda b: b + b"\0\0", "left over"),
    (lambda b: (MAGIC ^ 1).to_bytes(4, "little") + b[4:], "magic"),
])
def test_a_blob_it_does_not_know_is_an_error_not_a_misread(spoil, message):
    """A format with more per cell (M-RoPE, llama.cpp versions to come) must fail, so the runner takes the prompt in
    itself (red when parse stops reading without checking what is left)."""
    blob = encode(_state(4, 2, 3, False, 1, 0, 1, 1))
    with pytest.raises(SeqStateError, match=message):
        parse(spoil(blob))


def test_a_cell_in_two_sequences_is_refused():
    blob = bytearray(encode(_state(2, 1, 1, False, 1, 0, 1, 2)))
    blob[20:24] = (2).to_bytes(4, "little")  # the first cell's n_seq_id (after magic, seq, streams, cells, pos)
    with pytest.raises(SeqStateError):
        parse(bytes(blob))


@pytest.mark.parametrize("ggml_type, dtype", [(0, torch.float32), (1, torch.float16), (30, torch.bfloat16)])
def test_float_rows_survive_the_trip_at_their_precision(ggml_type, dtype):
    x = torch.randn(5, 12)
    rows = to_rows(x, ggml_type)
    assert rows.shape == (5, 12 * torch.finfo(dtype).bits // 8)
    assert torch.equal(from_rows(rows, ggml_type), x.to(dtype).float())


def test_a_quantised_cache_type_is_refused():
    with pytest.raises(SeqStateError, match="F32, F16 or BF16"):
        to_rows(torch.zeros(1, 32), 8)  # GGML_TYPE_Q8_0
