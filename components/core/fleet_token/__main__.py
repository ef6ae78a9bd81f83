"""`python -m gpucluster_fleet_token` (in the CronJob) or `python -m components.core.fleet_token` (here):
rotate the manager's token for each worker. One JSON report per line on stdout (rotate.rotate: `ok` the new
token written, `reseeded` from the seed Secret, `anchor` and `previousAnchor` on the worker, `deletedAnchors`);
exit 0 when every rotation wrote its new token, revoked the one two rotations old and got at least half the life
it asked for, 1 otherwise (each report's `error` says where it stopped, or what is wrong with what it wrote)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import client, names, rotate


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {names.PACKAGE}", description=__doc__.split(":")[0])
    p.add_argument("--kubeconfig", required=True,
                   help=f"the manager's kubeconfig file, or `{client.IN_CLUSTER}` (the pod's service account)")
    p.add_argument("--namespace", default=names.MANAGER_NAMESPACE, help="where the kubeconfig Secrets are")
    p.add_argument("--secret", action="append", default=[],
                   help=f"a kubeconfig Secret ({names.SECRET_PREFIX}<cluster>), repeatable; default: every "
                        f"{names.SECRET_PREFIX}* Secret but the seeds (*{names.SEED_SUFFIX}; needs list on Secrets)")
    p.add_argument("--lifetime-seconds", type=int, required=True,
                   help=f"the new tokens' life, at least {names.MIN_LIFETIME_SECONDS}")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    failed = False
    try:
        with client.manager_client(args.kubeconfig) as manager:
            secrets = args.secret or rotate.fleet_secrets(manager, args.namespace)
            if not secrets:
                print(f"no {names.SECRET_PREFIX}* Secret in {args.namespace}: nothing to rotate", file=sys.stderr)
            for secret in secrets:
                report = rotate.rotate(manager, names.cluster_of(secret), secret, args.lifetime_seconds,
                                       time.time(), args.namespace)
                failed |= report["error"] is not None
                print(json.dumps(report, sort_keys=True), flush=True)
    except (client.KubeconfigError, client.kubeapi.ApiError, OSError, RuntimeError, ValueError) as err:
        print(f"{names.PACKAGE}: {err}", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
