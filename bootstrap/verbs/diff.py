"""`python -m bootstrap diff OLD.json NEW.json`: what changes between two offline plans, in Markdown.

Compares two `python -m bootstrap plan --json` outputs (every resource with
its inputs and options) and prints a Markdown report: resources added,
removed and changed, with each changed property's path and old -> new
value; the changes that make the provider replace a resource
(bootstrap/offline/replacements.py), those that replace data or running jobs
first; retain/protect changes; and the estimated cost per hour at minimum
and maximum scale, before and after. Identical plans print nothing.

    python -m bootstrap plan --stack prod --json > base.json     # on the base branch
    python -m bootstrap plan --stack prod --json > head.json     # on your branch
    python -m bootstrap diff base.json head.json > report.md

Exit codes: 0 (changes or not), 2 unreadable input or an unwritable --out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bootstrap.offline.plan_diff import (
    PlanError,
    compare,
    load_plan,
    render,
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap diff", description=__doc__.split("\n")[0])
    parser.add_argument("old", type=Path, help="the base plan (`plan --json` output)")
    parser.add_argument("new", type=Path, help="the new plan")
    parser.add_argument("--out", type=Path, help="write the report to this file instead of stdout")
    args = parser.parse_args(argv)
    try:
        report = render(compare(load_plan(args.old), load_plan(args.new)))
    except PlanError as err:
        print(f"gpucluster: {err}", file=sys.stderr)
        return 2
    if args.out:
        try:
            args.out.write_text(report)
        except OSError as err:
            print(f"gpucluster: --out {args.out}: cannot write ({err.strerror or err})", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(report)
    return 0
