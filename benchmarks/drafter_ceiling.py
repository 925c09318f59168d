"""How far can model-free drafting go on this model? Exact greedy replay plus a measured cost model.

Under greedy decoding the committed text does not depend on the drafter (it is plain decoding's
output), so how many tokens a model-free drafter gets accepted at every step can be computed exactly
without running the model again: decode each prompt plainly once, then *replay* each drafter policy
over the known output (:func:`replay`). Token Recycling needs the verifier's logits: one
teacher-forced forward over prompt + output gives them for every position. Replayed M equals the M of
a real run of the same drafter from the same state (checked against ``leap bench`` in docs/results.md).

Speed is then predicted with the verification cost curve measured in the same process: a step that
verifies a draft of ``n`` nodes costs ``c(n) = t(forward over n + 1 tokens) / t(one token)``, so the
predicted speedup over plain decoding is ``tokens / sum(c(n_step))`` (drafting itself is taken as
free: model-free proposals cost well under 1% of a step). Besides every drafter, three *oracles*
bound what any selection among them could do: ``oracle-best`` drafts, at every step, with whichever
candidate's chain gets the most tokens accepted (hindsight); ``oracle-gated`` does the same but
does not draft when no candidate gets any token accepted; ``oracle-union`` verifies the union of all
candidates' drafts as one tree. No real policy can beat the oracles with these candidates.

    python benchmarks/drafter_ceiling.py --per-category 2 --max-new-tokens 128 --out docs/data/drafter_ceiling.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from tqdm import tqdm

from leap.core import SelfSpecDecoder, load_model
from leap.core.trees.draft_tree import DraftTree
from leap.core.drafters import Drafter, make_drafter
from leap.core.drafters.select import accepted_along
from leap.core.modeling.layers import LayerStack
from leap.data import load_prompts, pick_per_category

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_bench import forward_fns, interleaved_medians  # noqa: E402

POLICIES: dict[str, tuple[str, dict]] = {
    "prompt-lookup": ("prompt-lookup", {}),
    "prompt-lookup (tree 8)": ("prompt-lookup", {"tree_nodes": 8}),
    "suffix": ("suffix", {}),
    "suffix (tree 4)": ("suffix", {"tree_nodes": 4}),
    "suffix (tree 8)": ("suffix", {"tree_nodes": 8}),
    "token-recycling": ("token-recycling", {}),
    "token-recycling (tree 8)": ("token-recycling", {"tree_nodes": 8}),
    "gated": ("gated", {}),
    "select": ("select", {}),
    "select (suffix, prompt-lookup)": ("select", {"candidates": "suffix;prompt-lookup"}),
    "select (tree candidates)": ("select", {"candidates": "suffix:tree_nodes=4;prompt-lookup:tree_nodes=4"}),
}
ORACLE_CANDIDATES = ("suffix", "prompt-lookup", "token-recycling")


def replay(propose: Callable[[list[int], int], DraftTree], drafters: Sequence[Drafter], prompt: list[int],
           output: list[int], logits: torch.Tensor) -> list[tuple[int, int]]:
    """(draft nodes, accepted) of every step when ``propose`` drafts over a known greedy ``output``.

    ``logits[i]`` is the target's distribution after ``prompt + output[:i]`` (row 0: after the prompt).
    Every drafter in ``drafters`` hears the request as in a real session (begin, observe, finish).
    """
    for d in drafters:
        d.begin(prompt)
    tokens, pos, steps = list(prompt), 0, []
    while pos < len(output):
        tree = propose(tokens, len(output) - pos - 1) if len(output) - pos > 1 else DraftTree()
        accepted = accepted_along(tree, output[pos:])
        steps.append((len(tree), accepted))
        inputs = [tokens[-1], *output[pos : pos + accepted]]
        for d in drafters:
            if d.needs_logits:
                d.observe(inputs, logits[pos : pos + accepted + 1])
            d.feedback(len(tree), accepted)
        tokens.extend(output[pos : pos + accepted + 1])
        pos += accepted + 1
    for d in drafters:
        d.finish(tokens)
    return steps


def oracle(kind: str, candidates: Sequence[Drafter]) -> Callable[[list[int], int], DraftTree]:
    """A hindsight policy over ``candidates`` (see the module docstring); needs ``oracle.target`` set."""

    def propose(tokens: list[int], max_depth: int) -> DraftTree:
        trees = [c.propose_tree(tokens, max_depth) for c in candidates]
        if kind == "union":
            union = DraftTree()
            for tree in trees:
                for row in range(1, len(tree) + 1):
                    union.add_path([tree.tokens[r - 1] for r in tree.path(row)])
            return union
        target = propose.target[len(tokens) - propose.offset:]
        best = max(trees, key=lambda t: (accepted_along(t, target), -len(t)), default=DraftTree())
        if kind == "gated" and accepted_along(best, target) == 0:
            return DraftTree()
        return best

    return propose


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-category", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="results/drafter_ceiling.jsonl")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model("smollm2")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.open("a")

    def record(**row) -> None:
        log.write(json.dumps(row) + "\n")
        log.flush()

    # 1. the verification cost curve, c(n) = forward over n + 1 tokens / one token
    ks = list(range(1, 18))
    times = interleaved_medians(forward_fns(model, ks=ks), rounds=15)
    cost = {n: times[n + 1] / times[1] for n in range(0, 17)}
    record(kind="cost", cost=cost, ms_one_token=1000 * times[1], time=time.strftime("%Y-%m-%d %H:%M:%S"))

    # 2. plain greedy outputs and teacher-forced logits
    rows = pick_per_category(load_prompts(), args.per_category)
    stack, plain = LayerStack(model), SelfSpecDecoder(model, None)
    requests = []
    for row in tqdm(rows, desc="plain decoding"):
        prompt = model.encode(row["turns"][0], chat=True)
        output = plain.generate(prompt, max_new_tokens=args.max_new_tokens).token_ids
        with torch.inference_mode():
            cache = stack.new_cache()
            seq = prompt + output
            hidden = stack.run_layers(stack.embed(seq[:-1]), stack.full_plan, cache, 0)
            logits = stack.logits(hidden[:, len(prompt) - 1 :])
        requests.append((row, prompt, output, logits))

    # 3. replay every policy (drafter state carries across prompts, as in leap bench)
    policies: dict[str, tuple[Callable, list[Drafter]]] = {}
    for label, (name, kwargs) in POLICIES.items():
        d = make_drafter(name, **kwargs)
        policies[label] = (d.propose_tree, [d])
    for kind in ("best", "gated", "union"):
        cands = [make_drafter(n) for n in ORACLE_CANDIDATES]
        policies[f"oracle-{kind}"] = (oracle(kind, cands), cands)
    summary: dict[str, dict[str, list]] = {}
    for row, prompt, output, logits in tqdm(requests, desc="replay"):
        for label, (propose, ds) in policies.items():
            if label.startswith("oracle"):  # hindsight: the oracle reads the known output
                propose.target, propose.offset = output, len(prompt)
            steps = replay(propose, ds, prompt, output, logits)
            tokens = len(output)
            predicted_time = sum(cost[min(n, 16)] for n, _ in steps)
            record(kind="replay", policy=label, category=row["category"], question_id=row["question_id"],
                   tokens=tokens, steps=len(steps), nodes=sum(n for n, _ in steps),
                   M=tokens / len(steps), predicted_speedup=tokens / predicted_time)
            s = summary.setdefault(label, {"tokens": [], "steps": [], "time": [], "per_prompt": []})
            s["tokens"].append(tokens)
            s["steps"].append(len(steps))
            s["time"].append(predicted_time)
            s["per_prompt"].append(tokens / predicted_time)
    print(f"\ncost c(n) for n draft nodes: " + ", ".join(f"{n}: {cost[n]:.2f}" for n in (1, 2, 3, 4, 7, 8, 12, 16)))
    print("\n| policy | M | predicted speedup | worst prompt | prompts below 0.95x |\n|---|---|---|---|---|")
    for label, s in summary.items():
        m = sum(s["tokens"]) / sum(s["steps"])
        sp = sum(s["tokens"]) / sum(s["time"])
        worst = min(s["per_prompt"])
        below = sum(p < 0.95 for p in s["per_prompt"])
        print(f"| {label} | {m:.2f} | {sp:.2f}x | {worst:.2f}x | {below}/{len(s['per_prompt'])} |")
    print(f"\nrecords: {out}; per prompt: {statistics.mean(len(r[2]) for r in requests):.0f} tokens on average")


if __name__ == "__main__":
    main()
