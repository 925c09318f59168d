"""Host reads counted at run time (issue 20): every registered drafter, draft policy, tree rule and
redundancy metric keeps to its declared budget of device-to-host reads (syncs on a GPU), counted by
:class:`~leap.core.runtime.host_reads.HostReads` on the CPU - the count is the device's count."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.decoding.session import HOST_READS_PER_LAYER_TOKEN, HOST_READS_PER_STEP
from leap.core.drafters import drafters
from leap.core.modeling.trace import capture_trace
from leap.core.policies import draft_policies
from leap.core.runtime.device import to_numpy
from leap.core.runtime.host_reads import HostReads, on_host
from leap.core.verify.tree_rules import make_tree_rule, tree_rules
from leap.redundancy.base import make_metric, redundancy_metrics

PROMPT = [5, 9, 14, 20, 7, 11, 5, 9, 14, 20, 7, 11, 5, 9]
CONFIG = LayerConfig.parse("EESSEE")
TREES = {"suffix": {"tree_nodes": 6}, "stand": {"shape": "best-first", "tree_nodes": 6},
         "lowbit": {"shape": "siblings"}, "prompt-lookup": {"tree_nodes": 6},
         "eagle": {"head": "untrained", "shape": "eagle2", "tree_nodes": 6},
         "exit-head": {"head": "untrained", "layer": 3, "shape": "eagle2", "tree_nodes": 6}}


# ---------------------------------------------------------------- the counter itself
def test_every_way_a_value_reaches_python_is_counted_once():
    x, i = torch.tensor([1.5, 2.0]), torch.tensor(1)
    with HostReads() as reads:
        x[0].item(), x.tolist(), float(x[0]), int(i), bool(i), [1, 2, 3][i], np.asarray(x), x.numpy()
        (x > 1).nonzero()
        if i:
            pass
    assert reads.by_kind == {"item": 1, "tolist": 1, "__float__": 1, "__int__": 1, "__bool__": 2, "__index__": 1,
                             "__array__": 1, "numpy": 1, "nonzero": 1}
    with HostReads() as reads:
        host = x.cpu()
        host.tolist(), host[0].item(), host.sum().item()  # the copy was the read; its values are free
        to_numpy(torch.tensor([3.0]) * 2)  # leap's helper: one explicit transfer (not x: on the CPU, x.cpu() is x)
        x.to(torch.device("cpu"))  # a placement on the model's device is not a read
        on_host(torch.ones(3)).sum().item()  # declared host tensors are free
    assert reads.total == 2 and reads.by_kind == {"cpu": 1, "to": 1}, reads.report()


def test_ops_whose_output_shape_depends_on_the_values_are_reads():
    """Issue 33: a boolean-mask index in per-step code (a CUDA sync) was not counted; nor were these."""
    x, mask = torch.tensor([1.5, 2.0, 2.0]), torch.tensor([True, False, True])
    with HostReads() as reads:
        x[mask], x[mask, ...], torch.equal(x, x), torch.allclose(x, x), torch.masked_select(x, mask), x.unique()
        torch.unique_consecutive(x), torch.where(mask), x.repeat_interleave(torch.tensor([1, 2, 1])), x.argwhere()
    assert reads.by_kind == {"mask-index": 2, "equal": 1, "allclose": 1, "masked_select": 1, "unique": 1,
                             "unique_consecutive": 1, "where": 1, "repeat_interleave": 1, "argwhere": 1}, reads.report()
    with HostReads() as reads:  # shapes known without the values: no read
        x[1:], x[torch.tensor([0, 2])], torch.where(mask, x, 0.0), x.repeat_interleave(2), x.masked_fill(mask, 0.0)
    assert reads.total == 0, reads.report()


def test_formatting_membership_and_value_sized_outputs_are_reads():
    """Issue 54: the README says every read is counted; these counted zero (no per-step code uses them today)."""
    import torch.nn.functional as F

    x, s, i = torch.tensor([1.5, 2.0]), torch.tensor(2.5), torch.tensor([1, 0, 2])
    with HostReads() as reads:
        str(x), repr(x), f"{s:.3f}", 2.0 in x, torch.bincount(i), F.one_hot(i), torch.repeat_interleave(i)
    assert reads.by_kind == {"__repr__": 2, "__format__": 1, "__contains__": 1, "bincount": 1, "one_hot": 1,
                             "repeat_interleave": 1}, reads.report()
    with HostReads() as reads:  # the width given: known without the values
        F.one_hot(i, num_classes=4), F.one_hot(i, 4)
    assert reads.total == 0, reads.report()


def test_the_counter_adds_up_the_bytes_read():
    x = torch.zeros(1000)  # float32
    with HostReads() as reads:
        x[3].item(), float(x[4]), x[:10].tolist(), x.cpu()
    assert reads.bytes == 4 + 4 + 40 + 4000, reads.report()


# ---------------------------------------------------------------- decoding paths against their budgets
def _budget(decoder, drafter, record, sampled: bool) -> int:
    verify = max(HOST_READS_PER_STEP, decoder.tree_rule.host_reads_per_step if sampled else 1)
    policy = decoder.policy.host_reads_per_token
    own = (drafter.host_reads_per_step + drafter.host_reads_per_node * record.drafted) if drafter else 0
    # a greedy layer draft whose policy reads nothing keeps its tokens on the device: verification's read has them
    per_layer_token = 0 if not sampled and policy == 0 else HOST_READS_PER_LAYER_TOKEN + policy
    return verify + per_layer_token * record.layer_tokens + own


def _check_steps(decoder, temperature: float, n: int = 20) -> int:
    session = decoder.start(PROMPT, max_new_tokens=n, temperature=temperature,
                            generator=torch.Generator().manual_seed(0))
    steps = 0
    while not session.done:
        with HostReads() as reads:
            record = session.step()
        budget = _budget(decoder, decoder.drafter, record, temperature > 0)
        assert reads.total <= budget, f"{reads.report()}; budget {budget} for {record}"
        steps += 1
    return steps


def _drafter_cases():
    for name in drafters.names():
        yield pytest.param(name, dict(drafters.get(name).example_kwargs), id=name)
        if name in TREES:
            yield pytest.param(name, TREES[name], id=f"{name}-tree")
    # a head that trains while it drafts: its updates read nothing back (losses stay on the device)
    yield pytest.param("eagle", {"head": "untrained", "online": True, "online_every": 2}, id="eagle-online")
    yield pytest.param("exit-head", {"head": "untrained", "online": True, "online_every": 2}, id="exit-head-online")
    yield pytest.param("eagle", {"head": "untrained", "shape": "siblings", "width": 2, "num_tokens": 3},
                       id="eagle-siblings")  # a sampled skeleton tree


@pytest.mark.parametrize("name, kwargs", list(_drafter_cases()))
@pytest.mark.parametrize("temperature, rule", [(0.0, "match"), (1.0, "match"), (1.0, "traversal")])
def test_every_drafter_keeps_its_declared_host_reads(tiny_llama, name, kwargs, temperature, rule):
    if rule not in tree_rules:
        pytest.skip(f"{rule} not registered")
    decoder = SelfSpecDecoder(tiny_llama, CONFIG, drafter=name, drafter_kwargs=kwargs, tree_verify=rule)
    assert _check_steps(decoder, temperature) > 1


@pytest.mark.parametrize("policy", draft_policies.names())
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_every_draft_policy_keeps_its_declared_host_reads(tiny_llama, policy, temperature):
    assert _check_steps(SelfSpecDecoder(tiny_llama, CONFIG, policy), temperature) > 1


def test_a_greedy_step_reads_once_whatever_drafted_it(tiny_llama):
    """The budgets are tight where they should be: exactly one read for a plain, model-free or layer-drafted
    greedy step (a fixed-length layer chain of 4 tokens is read with the verification's verdict), and the
    output is still plain decoding's."""
    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=16).token_ids
    for config, drafter in ((None, None), (None, "suffix"), (CONFIG, None), (CONFIG, "prompt-lookup")):
        decoder = SelfSpecDecoder(tiny_llama, config, "fixed", policy_kwargs={"k": 4}, drafter=drafter)
        session = decoder.start(PROMPT, max_new_tokens=16)
        layer_tokens = 0
        while not session.done:
            with HostReads() as reads:
                record = session.step()
            layer_tokens += record.layer_tokens
            assert reads.total == 1, f"{config} {drafter}: {reads.report()}"
        assert session.new_token_ids == plain and (config is None or drafter is not None or layer_tokens > 4)
    assert {r: make_tree_rule(r).host_reads_per_step for r in tree_rules.names()} == {"match": 1, "traversal": 2}


# ---------------------------------------------------------------- redundancy metrics: one explicit transfer
@pytest.mark.parametrize("name", redundancy_metrics.names())
def test_every_metric_reads_its_result_once(tiny_llama, name):
    trace = capture_trace(tiny_llama, PROMPT)
    metric = make_metric(name)
    with HostReads() as reads:
        values = metric.compute(trace)
    assert len(np.asarray(values)) == tiny_llama.num_layers
    # at most one read, and that one the explicit copy of leap's helper (np.asarray(tensor) would crash on CUDA)
    assert reads.total <= 1 and set(reads.by_kind) <= {"to"}, \
        f"{name}: {reads.report()} (move the result with leap.core.runtime.device.to_numpy)"
