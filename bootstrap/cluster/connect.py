"""Which cluster: `--kubeconfig`, else $KUBECONFIG, else the stack's `kubeconfig` output.

The stack's kubeconfig runs `aws eks get-token` as the stack's AWS identity
(README "First deploy"), so the CLI reaches the API as the deployer does;
the kubernetes client runs that exec plugin itself.
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


def connect(stack: str | None, kubeconfig: str | None = None, context: str | None = None) -> Kube:
    """A Kube for the cluster the user means (see the module's docstring)."""
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    path = kubeconfig or os.environ.get("KUBECONFIG")
    try:
        if path:
            first = path.split(os.pathsep)[0]
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
