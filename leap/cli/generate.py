"""``leap generate PROMPT``: decode one prompt plainly, under a fixed configuration or drafter, or with a
search method; ``--compare`` times it against plain decoding, interleaved (:func:`leap.bench.stats.compare`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leap.cli.common import (
    add_model_args,
    add_search_args,
    config_from_args,
    import_modules,
    kv_args,
    load_for,
    method_args,
)


def _space_record(runner: Any, args: argparse.Namespace) -> dict[str, Any]:
    """What a reader needs to rerun this search's ablation: the metrics in LEAP's roles, the ablation flags, and
    the zones and decision groups the prompt's prefill drew (None where this request built no space: a choice
    carried over from an earlier request, or the loss budget's skip)."""
    out: dict[str, Any] = {"zone_metric": args.zone_metric, "group_metric": args.group_metric,
                           "zones_on": not args.no_zones, "groups_on": not args.no_groups,
                           "search_on": not args.no_search, "zones": None, "groups": None, "drafter_options": None}
    if runner.built_space:
        space = runner.agent.space
        out["zones"] = "".join(zone.name[0] for zone in space.zones)
        out["groups"] = space.groups
        out["drafter_options"] = [o.label for o in space.options] or None
    return out


def add_parser(sub) -> None:
    g = sub.add_parser("generate", help="decode one prompt (plain or self-speculative)")
    g.add_argument("prompt", help="the prompt text (use --chat to wrap it in the chat template)")
    add_model_args(g)
    g.add_argument("--method", default=None,
                   help="ar (plain), self-spec (fixed --config), leap (zone-aware MCTS), or any agent from "
                        "`leap agents` (mcts, ucb, bayes, random, swift, clasp, zone-rule); default: self-spec "
                        "when a config or drafter is given, else LEAP's search over the default drafters, their "
                        "settings and the layers (with a memory of earlier requests)")
    add_search_args(g)
    g.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module first (e.g. one that registers your own agent or policy)")
    g.add_argument("--config", default=None, help="compact (EESR...) or sparse (skip=5-7;repeat=28) configuration")
    g.add_argument("--skip", default=None, help="layers to skip in the draft, e.g. 5,6,7 or 10-14")
    g.add_argument("--repeat", default=None, help="layers the draft runs twice, e.g. 28")
    g.add_argument("--draft-policy", default="confidence", help="when to stop drafting (see `leap policies`)")
    g.add_argument("--policy-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="policy constructor argument, e.g. threshold=0.7 or k=4 (repeatable)")
    g.add_argument("--draft-vocab", type=int, default=None, help="restrict the draft LM head to N frequent tokens")
    g.add_argument("--drafter", default=None,
                   help="a drafter (see `leap drafters`): lowbit (the model's own low-bit weights; the fastest "
                        "measured on the default model), prompt-lookup, suffix, token-recycling, stand (model-free), "
                        "eagle, exit-head (trained heads), hybrid (model-free, continued by the --skip/--config "
                        "draft), layer-skip")
    g.add_argument("--drafter-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="drafter constructor argument, e.g. num_tokens=10 (repeatable)")
    g.add_argument("--tree-verify", default="match", metavar="RULE",
                   help="how draft trees are verified under sampling: match (default) or traversal "
                        "(Traversal Verification; see `leap.core.verify.tree_rules`)")
    g.add_argument("--no-reuse-prefix", action="store_true", help="recompute the exact-prefix layers in verification")
    g.add_argument("--max-new-tokens", type=int, default=128)
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=None)
    chat = g.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=True, help="apply the chat template (default)")
    chat.add_argument("--no-chat", dest="chat", action="store_false")
    g.add_argument("--compare", action="store_true",
                   help="also decode plainly, interleaved (warm-up, then --repeats rounds alternating which goes "
                        "first); report the median speedup, its spread and token identity")
    g.add_argument("--repeats", type=int, default=3, help="timed rounds of --compare (default 3)")
    g.add_argument("--json", action="store_true", help="print the outcome record as one JSON object")
    g.add_argument("--profile", action="store_true",
                   help="where the time went: prefill, draft (per token), verification (per step), the drafter "
                        "joining, model vs leap's code; in plain steps with --compare (also under 'profile' in --json)")


def run(args: argparse.Namespace) -> int:
    import_modules(args.imports)
    from leap.core import SelfSpecDecoder

    _check_settings(args)  # bad --drafter-arg / --agent-arg / --policy-arg: one line, before the model loads
    model = load_for(args)
    config = config_from_args(args, model.num_layers)
    method = args.method or ("self-spec" if config is not None or args.drafter else "leap")
    if args.method is None and method == "leap" and not args.drafters:
        # the default: the search over the default drafters (and their settings) with the layers, 4 real steps a
        # trial (model-free drafts accept 0-7+ tokens from step to step: one step mostly measures luck); an
        # explicit --method leap is the paper's layer-only search
        args.drafters = "default"
        if args.steps_per_trial == 1:
            args.steps_per_trial = 4
    if method == "ar":
        config = None
    elif method == "self-spec" and config is None and not args.drafter:
        raise SystemExit("leap: --method self-spec needs --config, --skip/--repeat or --drafter")
    elif method not in ("ar", "self-spec") and args.drafter:
        raise SystemExit("leap: --drafter fixes one drafter (with --method self-spec); to let the search choose "
                         "among drafters, give --drafters a,b,c")
    if args.drafters and method in ("ar", "self-spec"):
        raise SystemExit("leap: --drafters is searched over by a search method (leap, mcts, ucb, bayes, random)")
    settings = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                    seed=args.seed, chat=args.chat)

    def run_method():
        """One whole call of the method (a fresh decoder and search each time): (outcome, record)."""
        decoder = SelfSpecDecoder(
            model, config, args.draft_policy, policy_kwargs=kv_args(args.policy_arg),
            reuse_prefix=not args.no_reuse_prefix, draft_vocab=args.draft_vocab,
            drafter=args.drafter if method != "ar" else None, drafter_kwargs=kv_args(args.drafter_arg),
            tree_verify=args.tree_verify, low_bits=args.low_bits,
        )
        if method in ("ar", "self-spec"):
            outcome = decoder.generate(args.prompt, **settings)
            return outcome, outcome.to_dict()
        return _search(decoder)

    from leap.search.memory.store import memory_for

    drafters = None
    if args.drafters and method not in ("ar", "self-spec"):
        from leap.search.drafter_space import DEFAULT_DRAFTERS

        drafters = DEFAULT_DRAFTERS if args.drafters == "default" else args.drafters.split(";")
    # the user's memory of earlier requests ($LEAP_CACHE/search_memory); under --compare every round (the warm-up
    # too) starts from it as it was before this command, and one round's learning is kept at the end
    saved_memory = memory_for(model, prior=not args.no_prior) if drafters and not args.no_memory else None
    round_memories = []

    def _search(decoder):
        from leap.search.factory import agent_factory
        from leap.search.runner import OnlineSearch, SearchSettings

        memory = saved_memory
        if memory is not None and args.compare:
            memory = saved_memory.copy()
            round_memories.append(memory)
        at_start = "off" if memory is None else memory.describe()
        factory = agent_factory(method, model.num_layers, zones=not args.no_zones, groups=not args.no_groups,
                                search=not args.no_search, seed=args.seed, agent_kwargs=kv_args(args.agent_arg),
                                drafters=drafters, zone_metric=args.zone_metric, group_metric=args.group_metric,
                                metric_args=method_args(args.metric_arg, "--metric-arg"), low_bit=args.low_bit_layers,
                                memory=memory, drafter_settings=not args.no_drafter_settings)
        runner = OnlineSearch(decoder, factory, SearchSettings(budget=args.budget, reward=args.reward,
                                                               min_speedup=args.min_speedup, give_up=args.give_up,
                                                               steps_per_trial=args.steps_per_trial,
                                                               carry_over=args.carry_over,
                                                               loss_budget=args.loss_budget,
                                                               favourite_first=args.favourite_first,
                                                               abandon=args.abandon, explore=args.explore,
                                                               kin=args.kin, steady=args.steady),
                              memory=memory)
        searched = runner.generate(args.prompt, **settings)
        record = searched.to_dict()
        record["search_space"] = _space_record(runner, args)
        record["search_memory_at_start"] = at_start
        return searched.generation, record

    if args.compare:
        from leap.bench.stats import compare

        plain_decoder = SelfSpecDecoder(model, None)
        result = compare(run_method, lambda: plain_decoder.generate(args.prompt, **settings), repeats=args.repeats,
                         tokens=lambda out: list(out[0].token_ids) if isinstance(out, tuple) else list(out.token_ids),
                         device=model.device)
        outcome, record = result.last_method
        if round_memories:  # what the last timed round learnt, from the memory as it was before the command
            saved_memory.adopt(round_memories[-1])
        plain = result.last_plain
        record.update(plain_tokens_per_s=plain.new_tokens / result.plain_seconds[-1],
                      speedup=result.median, speedup_low=result.low, speedup_high=result.high,
                      speedup_rounds=result.ratios, method_seconds=result.method_seconds,
                      plain_seconds=result.plain_seconds, identical_to_plain=result.identical, order=result.order,
                      call_time_s=result.method_seconds[-1])
        if not result.identical and args.temperature == 0:  # where and how close: a near-tie, or a bug (float32)
            from leap.core.verify.divergence import first_divergence

            prompt = model.encode(args.prompt, chat=args.chat)
            record["divergence"] = first_divergence(model, prompt, list(plain.token_ids), list(outcome.token_ids))
    else:
        from leap.core.runtime.device import wall_clock

        start = wall_clock(model.device)
        outcome, record = run_method()
        record["call_time_s"] = wall_clock(model.device) - start  # the whole call: search included
    record["model"] = model.name
    record["method"] = method
    if args.profile:
        from leap.core.decoding.profile import format_profile, time_profile

        plain_step = None
        if args.compare and result.last_plain.new_tokens:
            plain_step = result.plain_seconds[-1] / result.last_plain.new_tokens
        record["profile"] = time_profile(outcome, plain_step, call_s=record["call_time_s"])
    if args.json:
        from leap.core.runtime.provenance import provenance

        record["provenance"] = provenance(model)  # the commit and versions a figure from this record needs
        print(json.dumps(record))
        return 0
    print(outcome.text)
    print("---", file=sys.stderr)
    print(
        f"{outcome.new_tokens} new tokens in {record['call_time_s']:.2f} s "
        f"({outcome.new_tokens / max(record['call_time_s'], 1e-9):.1f} tok/s, whole call), "
        f"{len(outcome.steps)} steps, mean accepted length M = {outcome.mean_accepted:.2f}, "
        f"draft acceptance {outcome.acceptance_rate:.0%}, stop: {outcome.stop_reason}",
        file=sys.stderr,
    )
    print(f"method: {method}; config: {outcome.config or 'plain decoding'}; policy: {outcome.policy}", file=sys.stderr)
    if args.profile:
        print(format_profile(record["profile"]), file=sys.stderr)
    if "search_iterations" in record:
        print(f"search: {record['search_iterations']} iterations, converged: {record['converged']}, "
              f"overhead {record['search_overhead_s']:.3f} s; fixed: {record['fixed_config'] or 'plain decoding'}",
              file=sys.stderr)
    if args.compare:
        if args.temperature > 0:  # two samples differ legitimately; the distribution is what is preserved
            same = "sampled: not compared (speculative sampling keeps the distribution, tested in the test suite)"
        else:
            same = "identical" if record["identical_to_plain"] else _difference(record.get("divergence"), model)
        print(
            f"plain decoding: {record['plain_tokens_per_s']:.1f} tok/s; speedup {record['speedup']:.2f}x "
            f"(median of {len(record['speedup_rounds'])} interleaved rounds, whole calls timed; range "
            f"{record['speedup_low']:.2f}-{record['speedup_high']:.2f}x); tokens {same}",
            file=sys.stderr,
        )
    return 0


def _difference(divergence: dict | None, model) -> str:
    """What ``--compare`` says where the method's tokens are not plain decoding's (T = 0)."""
    where = "" if divergence is None else (
        f" at new token {divergence['position']} (plain decoding's top-2 logit margin there: "
        f"{divergence['margin']:.4g})")
    if str(model.dtype) == "torch.float32":
        return (f"DIFFERENT{where}: in float32 greedy speculation must be token-identical to plain decoding - a bug "
                f"in leap; please report it with this command")
    return (f"DIFFERENT{where}: in {str(model.dtype).replace('torch.', '')} the verification's batched sums can "
            f"break a near-tie the other way (a small margin says so); --dtype float32 is token-identical")


def _check_settings(args: argparse.Namespace) -> None:
    """The command line's settings against the declared signatures of the drafter, agent and policy they go to
    (:func:`leap.core.registry.check_arguments`)."""
    from leap.core.drafters import drafters
    from leap.core.policies import draft_policies
    from leap.core.registry import check_arguments
    from leap.search import search_agents

    if args.drafter:
        check_arguments(drafters.get(args.drafter), kv_args(args.drafter_arg), f"drafter {args.drafter!r}")
    agent = "mcts" if (args.method or "leap") == "leap" else args.method
    if args.agent_arg and agent in search_agents:
        check_arguments(search_agents.get(agent), kv_args(args.agent_arg), f"search agent {agent!r}")
    if args.policy_arg and args.draft_policy in draft_policies:
        check_arguments(draft_policies.get(args.draft_policy), kv_args(args.policy_arg),
                        f"draft policy {args.draft_policy!r}")
