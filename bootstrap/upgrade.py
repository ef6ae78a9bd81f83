"""`python -m bootstrap upgrade --stack S`: resolve newer AMI and add-on pins, show the diff, write them.

The stack pins the AL2023 AMI release of every node group and each EKS
add-on's version (gpucluster:versions), so a `pulumi up` after AWS
publishes new ones changes nothing. This is the explicit way to move:

    python -m bootstrap upgrade --stack dev            # what would change
    python -m bootstrap upgrade --stack dev --write    # write it into Pulumi.dev.yaml
    pulumi preview --stack dev && pulumi up --stack dev

A new AMI release rolls every node of every node group (max_unavailable 1),
so upgrade when no job runs. `--kubernetes-version 1.36` resolves pins for
the next minor and writes kubernetesVersion with them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bootstrap import stackfile
from components.core import config
from components.core import versions as v


class UpgradeError(Exception):
    pass


def _version_key(version: str) -> tuple[int, ...]:
    """v1.20.4-eksbuild.12 -> (1, 20, 4, 12): compare builds numerically."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def newest_addon_version(response: dict, kubernetes_version: str) -> str:
    """The newest add-on version compatible with the cluster version, from DescribeAddonVersions."""
    candidates = [av["addonVersion"] for addon in response.get("addons", [])
                  for av in addon.get("addonVersions", [])
                  if any(c.get("clusterVersion") == kubernetes_version for c in av.get("compatibilities", []))]
    if not candidates:
        raise UpgradeError(f"no version of the add-on is compatible with Kubernetes {kubernetes_version}")
    return max(candidates, key=_version_key)


def resolve(ssm, eks, kubernetes_version: str) -> dict:
    """{"amiReleaseVersion": ..., "addons": {name: version}} as AWS recommends them today."""
    ami = ssm.get_parameter(Name=v.release_version_parameter(kubernetes_version))["Parameter"]["Value"]
    addons = {}
    for name in config.ADDONS:
        try:
            addons[name] = newest_addon_version(
                eks.describe_addon_versions(addonName=name, kubernetesVersion=kubernetes_version), kubernetes_version)
        except UpgradeError as err:
            raise UpgradeError(f"{name}: {err}") from None
    return {"amiReleaseVersion": ami, "addons": addons}


def diff(old: dict, new: dict) -> list[str]:
    """'key: old -> new' for every pin that changes (an empty list: nothing to do)."""
    lines = []
    if old.get("amiReleaseVersion") != new["amiReleaseVersion"]:
        lines.append(f"amiReleaseVersion: {old.get('amiReleaseVersion') or '(unset)'} -> {new['amiReleaseVersion']}")
    for name, version in new["addons"].items():
        was = (old.get("addons") or {}).get(name)
        if was != version:
            lines.append(f"addons.{name}: {was or '(unset)'} -> {version}")
    return lines


def render_block(pins: dict, indent: str = "  ") -> list[str]:
    lines = [f"{indent}{config.NAMESPACE}:versions:", f"{indent}  amiReleaseVersion: {pins['amiReleaseVersion']}",
             f"{indent}  addons:"]
    lines += [f"{indent}    {name}: {version}" for name, version in pins["addons"].items()]
    return lines


def rewrite(text: str, pins: dict, kubernetes_version: str | None = None) -> str:
    """The stack file with its versions block replaced (comments elsewhere kept) and, if given,
    kubernetesVersion set."""
    try:
        text = stackfile.set_key(text, f"{config.NAMESPACE}:versions", lambda indent: render_block(pins, indent),
                                 after=f"{config.NAMESPACE}:kubernetesVersion")
    except stackfile.StackFileError as err:
        raise UpgradeError(str(err)) from None
    if kubernetes_version is not None:
        text = stackfile.set_scalar(text, f"{config.NAMESPACE}:kubernetesVersion", f'"{kubernetes_version}"')
    return text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap upgrade", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True, help="stack name: Pulumi.<stack>.yaml")
    parser.add_argument("--kubernetes-version", choices=config.EKS_VERSIONS,
                        help="resolve pins for this version and write it as kubernetesVersion")
    parser.add_argument("--write", action="store_true", help="write the new pins into the stack file")
    args = parser.parse_args(argv)
    import boto3
    import botocore.exceptions

    path = stackfile.stack_path(args.stack)
    try:
        raw = stackfile.read_stack_config(args.stack)
        current = stackfile.stack_versions(path)
        version = args.kubernetes_version or raw.get(f"{config.NAMESPACE}:kubernetesVersion") \
            or config.DEFAULT_KUBERNETES_VERSION
        region = raw.get("aws:region")
        if not region:
            raise UpgradeError(f"{path.name} sets no aws:region")
        session = boto3.Session(profile_name=raw.get("aws:profile") or None, region_name=region)
        pins = resolve(session.client("ssm"), session.client("eks"), version)
    except (stackfile.StackFileError, UpgradeError) as err:
        print(f"gpucluster: {err}", file=sys.stderr)
        return 1
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        print(f"gpucluster: cannot resolve the versions for Kubernetes {version}: {err}", file=sys.stderr)
        return 1
    changes = diff(current, pins)
    if args.kubernetes_version and args.kubernetes_version != raw.get(f"{config.NAMESPACE}:kubernetesVersion"):
        changes.insert(0, f"kubernetesVersion: {raw.get(f'{config.NAMESPACE}:kubernetesVersion')} -> {version}")
    if not changes:
        print(f"{path.name}: the pins are the newest for Kubernetes {version}; nothing to do")
        return 0
    print(f"{path.name}, Kubernetes {version}:")
    print("\n".join(f"  {line}" for line in changes))
    if args.write:
        Path(path).write_text(rewrite(Path(path).read_text(), pins, args.kubernetes_version))
        print(f"wrote {path.name}; next: pulumi preview --stack {args.stack} (an AMI change rolls every node)")
    else:
        print("(not written: add --write)")
    return 0
