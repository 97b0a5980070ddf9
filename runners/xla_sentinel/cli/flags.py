"""The flags several `xla-sentinel` subcommands share, each declared once: a helper adds it to
a subcommand's parser, so its name, type and help read the same in every command."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from xla_sentinel.spec.campaign import BudgetSpec, CampaignSpec, SpecError


def add_campaign(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """The campaign file: a subcommand's positional argument where it cannot run without
    one, `--campaign` where it can (targets and references then default)."""
    help = "campaign YAML (a spec or a FuzzCampaign manifest): targets, references, corpus"
    if required:
        p.add_argument("campaign", help=help)
    else:
        p.add_argument("--campaign", help=help)


def add_out(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--out", required=True, help=help)


def add_inject_pass(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inject-pass", action="append", metavar="FILE.py[:FUNC]",
                   help="HLO pass plugin registered in the targets under test (repeatable)")


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress line")


# Flags that override a field of the campaign file, and the field each sets: a bad value is
# reported under the flag's name, not the field's.
OVERRIDES = {"--budget-programs": "spec.budget.programs", "--budget-seconds": "spec.budget.seconds",
             "--workers": "spec.workers"}


def add_overrides(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget-programs", type=int, metavar="N",
                   help="programs to run (overrides spec.budget)")
    p.add_argument("--budget-seconds", type=float, metavar="S",
                   help="seconds to run (overrides spec.budget)")
    p.add_argument("--workers", type=int, metavar="N", help="worker processes (overrides spec.workers)")


def apply_overrides(spec: CampaignSpec, args: argparse.Namespace) -> CampaignSpec:
    """`spec` with the override flags given; SpecError naming the flag when one is bad."""
    changes: dict[str, Any] = {}
    if args.budget_programs is not None or args.budget_seconds is not None:
        changes["budget"] = BudgetSpec(programs=args.budget_programs, seconds=args.budget_seconds)
    if args.workers is not None:
        changes["workers"] = args.workers
    spec = replace(spec, **changes)
    try:
        spec.check()
    except SpecError as e:
        # The file's spec was checked when loaded: what fails now is an override.
        field_path, _, why = str(e).partition(":")
        flag = next((f for f, field in OVERRIDES.items() if field == field_path), field_path)
        raise SpecError(f"{flag}:{why}") from None
    return spec
