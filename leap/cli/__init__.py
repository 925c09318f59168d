"""leap.cli: the ``leap`` command line, one module per command.

Each command module has ``add_parser(sub)`` (its arguments) and ``run(args)`` (what it does), and
imports the code it drives only inside ``run``, so ``leap --help`` stays fast and torch-free;
:mod:`leap.cli.common` holds the argument helpers they share. ``leap generate`` decodes one prompt
(``--compare`` against plain decoding), ``leap bench`` / ``leap report`` run and tabulate Spec-Bench,
``leap sweep`` runs agents x metrics x seeds through the same harness, ``leap redundancy`` prints LEAP's Stage I, ``leap calibrate`` and ``leap smoke`` measure the machine, ``leap doctor`` checks the install, ``leap train-head`` trains an EAGLE draft head,
and ``leap policies | metrics | agents | drafters`` list the registries.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from leap.cli import bench, calibrate, doctor, generate, listing, redundancy, report, smoke, train_head

__all__ = ["main", "build_parser", "COMMANDS"]

#: command name -> the module that defines it (``leap <name>``)
COMMANDS = {"generate": generate, **{name: listing for name in listing.NAMES}, "redundancy": redundancy,
            "bench": bench, "smoke": smoke, "calibrate": calibrate, "report": report,
            "train-head": train_head, "sweep": bench, "doctor": doctor}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leap", description="Self-speculative decoding workbench")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in dict.fromkeys(COMMANDS.values()):  # each module once, in order
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from leap.core.errors import LeapError

    try:
        return COMMANDS[args.command].run(args)
    except LeapError as err:
        print(f"leap: error: {err}", file=sys.stderr)
        return 2
