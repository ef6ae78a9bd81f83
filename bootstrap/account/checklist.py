"""The preflight checklist: every check in the order it runs, and the runner that turns a crash into UNKNOWN."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

from bootstrap.account import checks, pin_checks, quota_checks
from bootstrap.account.checks import FAIL, UNKNOWN, Check, Context
from components.core import config

CHECKS = (checks.identity, checks.zone_plan, pin_checks.ami_release, pin_checks.addon_versions,
          quota_checks.vcpu_quotas, checks.reservations,
          quota_checks.network_quotas, quota_checks.eks_quotas, quota_checks.fsx_quota,
          checks.admins, checks.endpoint, checks.images)
# AWS's what-is-my-address service (the README's `curl -fsS https://checkip.amazonaws.com`).
CHECKIP_URL = "https://checkip.amazonaws.com"


def how_to_set(key: str) -> str:
    if key.endswith("adminPrincipalArns"):
        return ("admin=$(venv/bin/python -m bootstrap whoami) && "
                "pulumi config set --path 'gpucluster:adminPrincipalArns[0]' \"$admin\"")
    return ("ip=$(curl -fsS https://checkip.amazonaws.com) && "
            "pulumi config set --path 'gpucluster:publicAccessCidrs[0]' \"$ip/32\" (or deployerInVpc: true)")


def public_ip() -> str | None:
    try:
        with urllib.request.urlopen(CHECKIP_URL, timeout=5) as response:  # noqa: S310 (a fixed https URL)
            return response.read().decode().strip() or None
    except OSError:
        return None


def run(cfg: config.StackConfig, standins: list[str], client: Callable, ip: Callable[[], str | None]) -> list[Check]:
    ctx = Context(cfg=cfg, client=client, public_ip=ip, standins=tuple(standins))
    results = [Check(f"{key} set", FAIL, f"not set in Pulumi.{cfg.stack}.yaml: {how_to_set(key)}")
               for key in standins]
    for check in CHECKS:
        name = check.__name__.replace("_", " ")
        try:
            results += check(ctx)
        except Exception as err:  # AccessDenied, a missing API, no credentials: this check cannot tell
            results.append(Check(name, UNKNOWN, f"{checks.error_code(err)}: {err}"))
    return results
