"""a. Every object dev and prod render is accepted by the real API server, its CEL rules and the operators' webhooks.

`local.cluster.up` applies every object server-side and fails on the first
refusal; these tests read each one back and then put every job the stack can
render through the webhooks with a server-side dry run.
"""

from __future__ import annotations

import json

import pytest

from local import cluster as local_cluster

from .conftest import Local


def _key(obj: dict) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def _applied(local: Local) -> list[dict]:
    return [o for o in [*local.rendered.stack_objects, *local.rendered.chart_objects]
            if o["kind"] not in local_cluster.SKIPPED_KINDS]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_object_the_stack_renders_is_in_the_cluster(cluster, stack):
    local = cluster(stack)
    missing = []
    for obj in _applied(local):
        kind, namespace, name = _key(obj)
        resource = f"{kind.lower()}.{obj['apiVersion'].split('/')[0]}" if "/" in obj["apiVersion"] else kind.lower()
        args = ["get", resource, name, "-o", "name", *(["-n", namespace] if namespace else [])]
        if local.kubectl(*args, check=False).strip() == "":
            missing.append(f"{kind} {namespace}/{name}")
    assert missing == []
    # The stack's own objects are all there: a plan that renders nothing would pass the loop above.
    kinds = {o["kind"] for o in local.rendered.stack_objects}
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "ClusterTrainingRuntime", "NetworkPolicy"} <= kinds


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_job_of_the_stack_passes_the_operators_webhooks(cluster, stack):
    """Each job of the stack, as `submit` renders it, through admission (Kueue's, JobSet's, Trainer's)."""
    local = cluster(stack)
    from bootstrap import stackfile
    from bootstrap.jobs import render

    cfg, _, _ = stackfile.load_stack(stack, standins=True)
    judged = []
    for index, job in enumerate(cfg.jobs):
        submission = render.build(cfg, index, from_file=False)
        manifest = {**submission.manifest, "metadata": {**submission.manifest["metadata"],
                                                         "name": f"{job.name}-admission"}}
        objects = [o for o in (submission.runtime, manifest) if o]
        out = local.kubectl("apply", "--server-side", "--dry-run=server", "--force-conflicts",
                            "--field-manager=e2e", "-o", "json", "-f", "-",
                            stdin="\n---\n".join(json.dumps(o) for o in objects))
        judged.append((job.name, submission.kind, out))
    assert [name for name, _, _ in judged] == [job.name for job in cfg.jobs]
    assert {kind for _, kind, _ in judged} >= ({"TrainJob"} if stack == "dev" else {"TrainJob", "MPIJob"})


@pytest.mark.stack("dev")
def test_the_job_pods_path_to_their_credentials_is_what_the_api_server_keeps(cluster):
    """The credentials policy, both address families, as the API server stored it (it validates ipBlocks), and the
    service account the Pod Identity association names, which the API server's controllers create."""
    from components.core import job_identity
    from components.core.kube import network_policy

    local = cluster("dev")
    policy = local.get("networkpolicies.networking.k8s.io", network_policy.JOB_CREDENTIALS, "training")
    assert policy["spec"]["egress"] == [{"to": [{"ipBlock": {"cidr": "169.254.170.23/32"}},
                                                {"ipBlock": {"cidr": "fd00:ec2::23/128"}}],
                                         "ports": [{"protocol": "TCP", "port": 80}]}]
    assert local.get("serviceaccounts", job_identity.SERVICE_ACCOUNT, "training")["metadata"]["name"] == "default"
