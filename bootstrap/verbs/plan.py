"""`python -m bootstrap plan --stack dev`: the offline plan.

Runs the real __main__.py under the mock runtime (bootstrap/offline/mocks.py, the
same one the tests use) and prints what `pulumi up` would create: a
preview-like tree with key properties, counts by type, the GPU pools with
their EFA fabric, storage throughput, job sizing, and the estimated
on-demand cost per hour at minimum and maximum scale; a stack in a fleet
adds its Fleet section (components.core.planning.fleet: a manager's
workers, pools, the fleet's cost and data transfer; a worker's manager).
`--out DIR` writes the resource list as JSON and every Kubernetes object
as YAML.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from bootstrap import stackfile
from bootstrap.offline import aws_data, mocks
from bootstrap.offline.plan_report import build_report, integral, kubernetes_objects, resource_rows
from bootstrap.offline.plan_text import render, resource_tree
from components.core import config
from components.core.config.cluster import stack_name
from components.core.fleet.workers import load_workers
from components.core.planning import fleet


def write_out(out_dir: Path, recording: mocks.Recording) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "resources.json").write_text(json.dumps(resource_rows(recording), indent=2, sort_keys=True,
                                                       default=str) + "\n")
    k8s_dir = out_dir / "k8s"
    k8s_dir.mkdir(exist_ok=True)
    for old in k8s_dir.glob("*.yaml"):
        old.unlink()
    for obj in kubernetes_objects(recording):
        meta = obj.get("metadata") or {}
        parts = [obj.get("kind", "Object"), meta.get("namespace", ""), meta.get("name", "")]
        fname = "-".join(p for p in parts if p).lower() + ".yaml"
        (k8s_dir / fname).write_text(yaml.safe_dump(obj, sort_keys=True))


def load_member(name: str) -> config.StackConfig:
    """Another stack of the fleet as its own plan reads it (stand-ins filled); an unreadable file is a
    ConfigError too, which load_workers reports at the worker's key."""
    try:
        return stackfile.load_stack(name, standins=True)[0]
    except stackfile.StackFileError as err:
        raise config.ConfigError([config.Problem(f"Pulumi.{name}.yaml", str(err))]) from None


def listed_by_manager(cfg: config.StackConfig) -> bool | None:
    """Whether a worker's manager lists it; None when the manager's stack file is not here or not valid."""
    try:
        manager = load_member(stack_name(cfg.fleet.manager))
    except config.ConfigError:
        return None
    theirs = manager.fleet
    return theirs is not None and theirs.role == "manager" and any(
        stack_name(w.stack) == cfg.stack for w in theirs.workers)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap plan", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default dev)")
    parser.add_argument("--out", type=Path, help="write resources.json and k8s/*.yaml to this directory")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--stack-file", type=Path, help="read this stack file instead of Pulumi.<stack>.yaml")
    args = parser.parse_args(argv)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        print(f"gpucluster: --out {args.out}: exists and is not a directory", file=sys.stderr)
        return 2
    if args.out is not None:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            print(f"gpucluster: --out {args.out}: cannot write there ({err.strerror or err})", file=sys.stderr)
            return 2

    try:
        cfg, raw, standins = stackfile.load_stack(args.stack, stack_file=args.stack_file, standins=True)
        # A manager's workers are read (and checked: each a worker of this manager) before anything runs.
        members = load_workers(cfg, load_member)
        recording = mocks.run_program(raw, args.stack, project=stackfile.project_name(),
                                      secret_keys=stackfile.secure_keys(args.stack, stack_file=args.stack_file))
    except (stackfile.StackFileError, config.ConfigError) as err:
        return stackfile.report(err)
    except aws_data.PlanDataError as err:
        print(f"gpucluster: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # the program's own clean errors (pulumi.RunError)
        if type(err).__name__ != "RunError":
            raise
        print(str(err), file=sys.stderr)
        return 1
    report = build_report(cfg, recording, standins)
    listed = listed_by_manager(cfg) if cfg.fleet is not None and cfg.fleet.role == "worker" else None
    own = (report["cost"]["minPerHour"], report["cost"]["maxPerHour"])
    if (section := fleet.plan(cfg, members, listed, own)) is not None:  # no key outside a fleet
        report["fleet"] = integral(section)
    if args.out:  # the files first: a reader that closes stdout early (`| head`) must not leave them stale
        try:
            write_out(args.out, recording)
        except OSError as err:
            print(f"gpucluster: --out {args.out}: cannot write there ({err.strerror or err})", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True, default=str))
    else:
        print(render(report, resource_tree(recording)))
        if args.out:
            print(f"\nwrote {args.out / 'resources.json'} and {len(kubernetes_objects(recording))} "
                  f"Kubernetes objects to {args.out / 'k8s'}")
    # A mandatory violation of the policy pack would fail `pulumi preview --policy-pack policy`.
    return 1 if any(v["level"] == "mandatory" for v in report["policyViolations"]) else 0
