"""Which cluster: `--kubeconfig`, else $KUBECONFIG, else the stack's `kubeconfig` output.

The stack's kubeconfig runs `aws eks get-token` as the stack's AWS identity
(README "First deploy"), so the CLI reaches the API as the deployer does;
the kubernetes client runs that exec plugin itself.

A fleet's member (connect_stack): stack X is reached through the kubeconfig
the user works with (`--kubeconfig`, else the first file of $KUBECONFIG) at
`--context` when given, else at its context named X; without a kubeconfig,
or when it has no context named X, through stack X's own `kubeconfig`
output. Only the stack the user named with --stack falls back to the
kubeconfig's current context too: the manager a worker's `--fleet` reaches,
the worker a job runs on and a worker being drained are never taken to be
whatever cluster the current context points at.
"""

from __future__ import annotations

import json
import os
from typing import Any

from bootstrap.cluster.api import ClusterUnreachable, Kube, NotDeployed


def kubeconfig_from_stack(stack: str) -> dict[str, Any]:
    """The stack's `kubeconfig` output (a secret), read through the Automation API."""
    from bootstrap.deployed import automation

    try:
        outputs = automation.select(stack).outputs()
    except automation.AutomationError as err:
        raise ClusterUnreachable(f"cannot read stack {stack}'s kubeconfig: {err}; or set KUBECONFIG "
                                 "(`pulumi stack output kubeconfig --show-secrets > kubeconfig`)") from None
    value = outputs.get("kubeconfig")
    if value is None:
        raise NotDeployed(f"stack {stack} has no `kubeconfig` output: has it been deployed (`pulumi up`)?")
    config = value.value
    return json.loads(config) if isinstance(config, str) else config


def kubeconfig_file(kubeconfig: str | None = None) -> str | None:
    """The kubeconfig file the user works with: --kubeconfig, else $KUBECONFIG's first file; None for neither."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    return path.split(os.pathsep)[0] if path else None


def contexts(path: str) -> set[str]:
    """The context names of a kubeconfig file (none when it cannot be read: connecting says why)."""
    import yaml

    try:
        with open(path) as f:
            data = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError):
        return set()
    return {c.get("name") for c in data.get("contexts") or [] if isinstance(c, dict)} if isinstance(data, dict) \
        else set()


def connect(stack: str | None, kubeconfig: str | None = None, context: str | None = None) -> Kube:
    """A Kube for the cluster the user means (see the module's docstring)."""
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    first = kubeconfig_file(kubeconfig)
    try:
        if first:
            if not os.path.isfile(first):
                raise ClusterUnreachable(f"kubeconfig {first}: no such file")
            client = kube_config.new_client_from_config(config_file=first, context=context)
        elif stack:
            client = kube_config.new_client_from_config_dict(kubeconfig_from_stack(stack), context=context)
        else:
            raise ClusterUnreachable("no cluster: give --stack, --kubeconfig or set KUBECONFIG")
    except ConfigException as err:
        raise ClusterUnreachable(f"kubeconfig: {err}") from None
    return Kube(client)


def connect_stack(stack: str, kubeconfig: str | None = None, context: str | None = None,
                  current: bool = False) -> Kube:
    """Stack `stack` of a fleet (the module's docstring): `context`, else its context named as the stack in the
    kubeconfig, else (`current`: the stack the user named) the kubeconfig's current context, else its output."""
    first = kubeconfig_file(kubeconfig)
    if first and not os.path.isfile(first):
        raise ClusterUnreachable(f"kubeconfig {first}: no such file")
    if first and (context or current or stack in contexts(first)):
        return connect(stack, first, context or (stack if stack in contexts(first) else None))
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    try:
        client = kube_config.new_client_from_config_dict(kubeconfig_from_stack(stack))
    except ClusterUnreachable as err:
        where = f"no context {stack} in kubeconfig {first}, and " if first else ""
        raise type(err)(f"stack {stack}: {where}{err}") from None
    except ConfigException as err:
        raise ClusterUnreachable(f"stack {stack}'s kubeconfig: {err}") from None
    return Kube(client)
