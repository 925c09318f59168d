"""``leap train-head``: train an EAGLE draft head for a model by self-distillation (:mod:`leap.heads.train`).

The model answers leap's own seed prompts (:mod:`leap.heads.prompts`; never evaluation prompts), its
features are recorded (:mod:`leap.heads.data`), a head is trained on them and written to
``$LEAP_CACHE/heads/<model>/head.safetensors`` (or ``--out``), where ``--drafter eagle`` finds it. With
``--layer k`` (k < L) it trains an exit head on layer k instead (:mod:`leap.heads.exit_head`, Kangaroo/DVI:
the same data plus each position's layer-k state), written to ``exit-<k>.safetensors`` there, where
``--drafter exit-head --drafter-arg layer=k`` finds it. Data and training resume after an interruption;
``--seed`` fixes both.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub) -> None:
    from leap.cli.common import add_model_args

    th = sub.add_parser("train-head", help="train an EAGLE draft head on the model's own answers")
    add_model_args(th)
    th.add_argument("--prompts", type=int, default=800, help="seed prompts the model answers (the data)")
    th.add_argument("--max-answer-tokens", type=int, default=192, help="longest answer per prompt")
    th.add_argument("--batch-size", type=int, default=16, help="prompts answered at once")
    th.add_argument("--epochs", type=int, default=3)
    th.add_argument("--lr", type=float, default=5e-4)
    th.add_argument("--batch-tokens", type=int, default=4096, help="padded tokens per training batch")
    th.add_argument("--vocab", type=int, default=8192, help="draft vocabulary: the N most frequent tokens")
    th.add_argument("--feature-weight", type=float, default=0.2, help="weight of the feature loss")
    th.add_argument("--noise", type=float, default=0.1, help="EAGLE's input-feature noise (x each dimension's std)")
    th.add_argument("--seed", type=int, default=0)
    th.add_argument("--layer", type=int, default=None,
                    help="k < L: train an exit head on layer k (Kangaroo/DVI: the draft runs layers 0..k-1, then the "
                         "head; --drafter exit-head:layer=k); default: the EAGLE head on the top layer")
    th.add_argument("--rank", type=int, default=256, help="exit head: the adapter's rank")
    th.add_argument("--out", default=None, help="where to write the head: a .safetensors file, or a folder that gets "
                                                "head.safetensors (default: $LEAP_CACHE/heads/<model>/)")
    th.add_argument("--quiet", action="store_true", help="no progress bars")


def head_path(out: str | None, folder, name: str = "head.safetensors") -> Path:
    """Where the head goes: ``out`` when it names a ``.safetensors`` file, ``out/<name>`` for a
    folder (existing or not), the model's cache folder by default - settled before hours of work."""
    if not out:
        return Path(folder) / name
    path = Path(out)
    if path.suffix != ".safetensors":
        path = path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def record_command(args: argparse.Namespace, exit_layer: bool) -> str:
    """The command a head's record names: the settings this kind of head used, and no others."""
    unused = ("batch_tokens", "feature_weight", "noise") if exit_layer else ("rank", "layer")
    return "leap train-head " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in sorted(vars(args).items())
                                         if k not in ("command", "quiet", *unused) and v not in (None, False))


def run(args: argparse.Namespace) -> int:
    import time

    from leap.cli.common import load_for
    from leap.core.runtime.provenance import provenance
    from leap.heads.data import build_data
    from leap.heads.head import save_head
    from leap.heads.store import cache_dir, exit_head_name, file_sha256
    from leap.heads.train import train_head

    model = load_for(args)
    folder = cache_dir(model)
    exit_layer = args.layer is not None and args.layer != model.num_layers
    if exit_layer:
        from leap.heads.exit_head import check_layer

        check_layer(args.layer, model.num_layers)  # before any work
    out = head_path(args.out, folder, exit_head_name(args.layer) if exit_layer else "head.safetensors")
    t0 = time.perf_counter()
    data = build_data(model, folder / f"data-{args.max_answer_tokens}-{args.seed}.pt",
                      prompts=args.prompts, max_new_tokens=args.max_answer_tokens, batch_size=args.batch_size,
                      seed=args.seed, progress=not args.quiet)
    t_data = time.perf_counter() - t0
    print(f"[train-head] data: {len(data.tokens)} answers, {data.answer_tokens} answer tokens ({t_data:.0f} s)")
    if exit_layer:
        from leap.heads.data import layer_states
        from leap.heads.exit_head import train_exit_head

        states = layer_states(model, data, args.layer, folder / f"states-{args.max_answer_tokens}-{args.seed}-"
                              f"layer{args.layer}.pt", progress=not args.quiet)
        head, record = train_exit_head(model, data, states, args.layer, rank=args.rank, epochs=args.epochs,
                                       lr=args.lr, vocab_size=args.vocab, seed=args.seed,
                                       checkpoint=out.with_suffix(".ckpt"), progress=not args.quiet)
    else:
        head, record = train_head(model, data, epochs=args.epochs, lr=args.lr, batch_tokens=args.batch_tokens,
                                  vocab_size=args.vocab, feature_weight=args.feature_weight, noise=args.noise,
                                  seed=args.seed, checkpoint=out.with_suffix(".ckpt"), progress=not args.quiet)
    t_all = time.perf_counter() - t0
    prov = provenance()
    record.update(model=model.name, data=data.record, answer_tokens=data.answer_tokens, data_seconds=round(t_data),
                  total_seconds=round(t_all), commit=prov.get("commit"),
                  command=record_command(args, exit_layer))
    save_head(head, out, record)
    print(f"[train-head] wrote {out} (sha256 {file_sha256(out)[:16]}), {t_all / 60:.1f} min in all")
    print(json.dumps({k: record[k] for k in ("heldout_top1_untrained", "history")}))
    warning = head_warning(record)
    if warning:
        print(f"[train-head] WARNING: {warning}", file=sys.stderr)
    return 0


def head_warning(record: dict) -> str | None:
    """What a user must hear about a head that learnt nothing (issue 36: held-out top-1 0.000, written silently)."""
    history = record.get("history") or []
    final = history[-1]["heldout_top1"] if history else None
    if final is None:
        return "no held-out accuracy was measured (no held-out data?): the head is untested"
    before = record.get("heldout_top1_untrained") or 0.0
    if final <= 0.0 or final <= before:
        return (f"held-out top-1 {final:.3f} (untrained {before:.3f}): this head learnt nothing a draft can use; "
                "train on more prompts (--prompts), for more --epochs, or check the data")
    return None
