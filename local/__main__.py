"""`python -m local up|apply|down|status|build [--stack S]`: the local control plane (README, "Try it without AWS")."""

from __future__ import annotations

import argparse
import os
import sys

from local import build, cluster, controlplane, processes
from local.fleet import members as fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local", description=__doc__)
    parser.add_argument("verb", choices=("up", "apply", "down", "status", "build"))
    parser.add_argument("--stack", default=os.environ.get("STACK") or None,
                        help="default: dev for up; for apply, the stack the running cluster was started with")
    args = parser.parse_args(argv)
    state = cluster.state_dir()
    try:
        if args.verb == "build":
            return build.main()
        if args.verb == "down":
            cluster.down(state)
            if fleet.member_states(fleet.state_dir()):
                fleet.down(fleet.state_dir())
            return 0
        if args.verb == "status":
            running = processes.running(state)
            for name, pid in sorted(running.items()):
                print(f"{name}: pid {pid}")
            print(f"KUBECONFIG={controlplane.kubeconfig_path(state)}" if running else "not running")
            for member in fleet.member_states(fleet.state_dir()):
                up = processes.running(member)
                print(f"fleet member {member.name}: {len(up)} processes" if up else f"fleet member {member.name}: "
                      "not running")
                running = running or up
            return 0 if running else 1
        if args.verb == "apply":
            if "kube-apiserver" not in processes.running(state):
                print("the local cluster is not running: `make local` first", file=sys.stderr)
                return 2
            started = (state / "stack").read_text().strip()
            if args.stack not in (None, started):
                print(f"the local cluster runs stack {started}, not {args.stack}: `make local-down`, then "
                      f"`make local STACK={args.stack}`", file=sys.stderr)
                return 2
            cluster.apply(started, state)
            return 0
        args.stack = args.stack or "dev"
        if fleet.is_manager(args.stack):
            path = fleet.up(args.stack, fleet.state_dir())
            print(f"\nThe local fleet runs: {', '.join(fleet.members(args.stack))}. Use it with:\n"
                  f"  export KUBECONFIG={path}   # a context per stack; the manager's is current")
            return 0
        cluster.up(args.stack, state)
    except (processes.LocalClusterError, build.BuildError, RuntimeError) as err:
        print(f"local: {err}", file=sys.stderr)
        print(f"logs: {state / 'logs'}; stop everything with `make local-down`", file=sys.stderr)
        return 2
    print(f"\nThe local cluster runs stack {args.stack}. Use it with:\n  export KUBECONFIG={controlplane.kubeconfig_path(state)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
