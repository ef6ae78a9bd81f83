"""The newest AMI release and EKS add-on versions for a Kubernetes version (SSM, EKS), and the stack file's pins block."""

from __future__ import annotations

import re

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
