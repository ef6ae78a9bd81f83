"""Which credentials a rotation starts from: the manager's kubeconfig Secret (its current token), or the seed.

The kubeconfig Secret is the rotator's (the manager's Pulumi program ignores changes to its data), so a worker
re-created (a new endpoint, CA and bootstrap token) or a token that expired (a run missed for two periods)
would leave it stuck. The seed Secret (`gpucluster-fleet-<cluster>-seed`) is the program's: rewritten from the
worker's `fleetAccess` at every `up`. A rotation reseeds, taking the seed's token as the current one, when:

- the seed's server or CA differs from the kubeconfig's (the worker was re-created or moved), or
- the kubeconfig's token is refused (401) or the worker is unreachable with it, while the seed's works.

A token "works" when the worker answers a SelfSubjectReview (authentication.k8s.io/v1, GA in Kubernetes
1.28; every authenticated user may create one: the system:basic-user ClusterRole) with the manager's
service-account user. Without a seed (the local fleet writes none) the kubeconfig's token is the only one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import client, names
from .client import kubeapi

SELF_SUBJECT_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def whoami(worker: kubeapi.Client) -> str | None:
    """The user name the worker's API server sees for the client's credentials (ApiError when refused)."""
    review = worker.create(SELF_SUBJECT_REVIEW, {"apiVersion": "authentication.k8s.io/v1",
                                                 "kind": "SelfSubjectReview"})
    return ((review or {}).get("status") or {}).get("userInfo", {}).get("username")


def endpoint(config: Mapping[str, Any], context: str) -> tuple[str | None, str | None]:
    """(server, certificate-authority-data) of the kubeconfig's context."""
    cluster = client.entry(config, context)[0]
    return cluster.get("server"), cluster.get("certificate-authority-data")


def refusal(config: Mapping[str, Any], context: str) -> str | None:
    """None when the kubeconfig's token works on the worker; else why not (refused, unreachable, someone else).
    Any other API error (a 403, a 500) raises: that is no reason to reseed."""
    try:
        with client.connect(config, context) as worker:
            user = whoami(worker)
    except kubeapi.ApiError as err:
        if err.status == 401:
            return "is refused (401)"
        raise
    except OSError as err:  # URLError, a timeout, a TLS failure: the worker is not reachable with it
        return f"cannot reach the worker ({err})"
    return None if user == names.USERNAME else f"is {user!r}, not {names.USERNAME}"


def choose(live: dict[str, Any], seed: dict[str, Any] | None, context: str) -> tuple[dict[str, Any], str | None]:
    """(the kubeconfig to rotate from, why it is the seed's or None). Raises RuntimeError when neither works,
    before anything is changed."""
    if seed is not None and endpoint(live, context) != endpoint(seed, context):
        return seed, "the seed's server or CA differs from the kubeconfig's (the worker was re-created or moved)"
    why = refusal(live, context)
    if why is None:
        return live, None
    if seed is None:
        raise RuntimeError(f"the kubeconfig's token {why}, and there is no seed Secret to reseed from")
    seed_why = refusal(seed, context)
    if seed_why is not None:
        raise RuntimeError(f"the kubeconfig's token {why}, and the seed's {seed_why}")
    return seed, f"the kubeconfig's token {why}; the seed's works"
