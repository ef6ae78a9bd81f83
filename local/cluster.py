"""A stack's cluster half on the local control plane: up, apply, down.

`up` builds what is missing, starts etcd, the API server, the controller
manager, the scheduler and KWOK, registers the stack's node groups as
KWOK nodes, starts the stand-in for cluster-autoscaler's ProvisioningRequest
processing (local/autoscaler/provisioner.py), and applies the stack. `apply` renders the stack with the
offline plan (`python -m bootstrap plan --out`, as a user would) and
applies every object it renders, with the charts it installs rendered by
helm, in dependency order: namespaces, CRDs, the rest, the operators
(started once their CRDs exist), their webhooks, the custom resources
those webhooks judge, then the jobs; then it (re)starts the goodput
controller the stack renders as a local process (local/goodput).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from local import build, charts, controllers, controlplane, kubectl, kwok, nodes, processes
from local.autoscaler import provisioner
from local.goodput import controller as goodput

PROJECT_DIR = Path(__file__).resolve().parent.parent
DEFAULT_STATE = PROJECT_DIR / ".local-cluster"

JOB_KINDS = {"TrainJob", "MPIJob", "JobSet", "Job"}
WEBHOOK_KINDS = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
# Judged by the operators' webhooks, so applied once those are registered.
CUSTOM_GROUPS = {"kueue.x-k8s.io", "trainer.kubeflow.org", "jobset.x-k8s.io", "kubeflow.org"}
# Not applied: Kueue's visibility APIService names an aggregated API no local process serves, and an
# unavailable APIService breaks discovery for every client (kubectl, the namespace controller).
SKIPPED_KINDS = {"APIService": "Kueue's visibility API (VisibilityOnDemand) is not served locally"}


@dataclass(frozen=True)
class Rendered:
    """What the stack renders: its own objects, its charts' objects, its plan report."""

    stack_objects: list[dict[str, Any]]
    chart_objects: list[dict[str, Any]]
    unrendered: dict[str, str]  # helm release -> why its chart was not rendered
    report: dict[str, Any]
    resources: list[dict[str, Any]]

    @property
    def cluster_name(self) -> str:
        return next(r["inputs"]["name"] for r in self.resources if r["type"] == "aws:eks/cluster:Cluster")


def state_dir() -> Path:
    import os

    return Path(os.environ.get("GPUCLUSTER_LOCAL_STATE") or DEFAULT_STATE).resolve()


def render(stack: str, state: Path) -> Rendered:
    """The stack's offline plan, its Kubernetes objects and its charts rendered by helm."""
    out = state / "plan"
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "bootstrap", "plan", "--stack", stack, "--out", str(out), "--json"],
                          cwd=PROJECT_DIR, capture_output=True, text=True)
    if done.returncode != 0:
        raise processes.LocalClusterError(f"bootstrap plan --stack {stack} failed:\n{done.stderr or done.stdout}")
    report = json.loads(done.stdout)
    resources = json.loads((out / "resources.json").read_text())
    stack_objects = [yaml.safe_load(p.read_text()) for p in sorted((out / "k8s").glob("*.yaml"))]
    chart_objects: list[dict[str, Any]] = []
    unrendered = {}
    for release in (r for r in resources if r["type"] == "kubernetes:helm.sh/v3:Release"):
        try:
            chart_objects += charts.render(release, state / "charts")
        except charts.ChartError as err:
            unrendered[release["inputs"]["name"]] = str(err)
    return Rendered(stack_objects, chart_objects, unrendered, report, resources)


def _group(obj: dict[str, Any]) -> str:
    api = obj.get("apiVersion", "")
    return api.split("/")[0] if "/" in api else ""


def phases(rendered: Rendered, ca_pem: str) -> dict[str, list[dict[str, Any]]]:
    """Every object to apply, by phase, in the order they are applied."""
    everything = [*rendered.chart_objects, *rendered.stack_objects]
    everything = controllers.rewrite_webhooks(everything, ca_pem)
    out: dict[str, list[dict[str, Any]]] = {"namespaces": [], "crds": [], "infrastructure": [], "tokens": [],
                                            "webhooks": [], "custom": [], "jobs": []}
    for obj in everything:
        kind = obj.get("kind")
        if kind in SKIPPED_KINDS:
            continue
        if kind == "Namespace":
            out["namespaces"].append(obj)
        elif kind == "CustomResourceDefinition":
            out["crds"].append(obj)
        elif kind in WEBHOOK_KINDS:
            out["webhooks"].append(obj)
        elif kind in JOB_KINDS:
            out["jobs"].append(obj)
        elif kind == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
            # After its ServiceAccount, as Pulumi orders them (depends_on): the token controller deletes a
            # token Secret whose account does not exist yet.
            out["tokens"].append(obj)
        elif _group(obj) in CUSTOM_GROUPS:
            out["custom"].append(obj)
        else:
            out["infrastructure"].append(obj)
    return out


def _wait_for_nodes(state: Path, count: int) -> None:
    def ready() -> bool:
        items = kubectl.get(state, "nodes")["items"]
        done = [n for n in items
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
                and not any(t["key"] == "node.kubernetes.io/not-ready" for t in n["spec"].get("taints", []))]
        return len(done) >= count
    processes.wait_until(ready, f"{count} KWOK nodes to be Ready", 120, state, "kwok")


def apply(stack: str, state: Path, out=print, rendered: Rendered | None = None) -> Rendered:
    """Render the stack (unless given) and apply it; start the operators the first time."""
    if rendered is None:
        out(f"rendering stack {stack} (bootstrap plan --out) and its charts (helm template)")
        rendered = render(stack, state)
    for release, why in rendered.unrendered.items():
        out(f"  not rendered: {release}: {why}")
    by_phase = phases(rendered, (state / "pki" / "ca.crt").read_text())
    kubectl.apply(state, by_phase["namespaces"], "namespaces")
    if not any(c["metadata"]["name"] == provisioner.CRD_NAME for c in by_phase["crds"]):
        # Served whether or not the stack installs it, before Kueue starts (its provisioning check needs it then).
        by_phase["crds"].append(provisioner.crd())
    kubectl.apply(state, by_phase["crds"], "CRDs")
    kubectl.apply_files(state, charts.prometheus_crds(), "the Prometheus Operator's CRDs")
    kubectl.wait(state, "crd", "condition=Established", extra=("--all",))
    kubectl.apply(state, by_phase["infrastructure"], "the stack's and charts' objects")
    kubectl.apply(state, by_phase["tokens"], "service account token Secrets")
    running = processes.running(state)
    if not all(m.name in running for m in controllers.managers()):
        # All or none: a lone restarted manager would clash with the others' ports and registry entries.
        processes.stop(state, names=[m.name for m in controllers.MANAGERS])
        out("starting " + ", ".join(m.name for m in controllers.managers()))
        controllers.start(state, rendered.chart_objects, rendered.stack_objects)
    kubectl.apply(state, by_phase["webhooks"], "webhook configurations")
    kubectl.apply(state, by_phase["custom"], "queues, flavors and runtimes")
    kubectl.apply(state, by_phase["jobs"], "jobs")
    counts = {phase: len(objs) for phase, objs in by_phase.items()}
    out("applied " + ", ".join(f"{n} {phase}" for phase, n in counts.items()))
    goodput.start(state, rendered.stack_objects, out)  # after its objects: its token, rights and config
    return rendered


def up(stack: str, state: Path, out=print) -> Rendered:
    """Build, start and apply; what the stack rendered. A running cluster of the same state is re-applied."""
    build.build_all(log=sys.stderr)
    state.mkdir(parents=True, exist_ok=True)
    rendered = None
    running_stack = (state / "stack").read_text().strip() if (state / "stack").is_file() else None
    if "kube-apiserver" in processes.running(state) and running_stack not in (None, stack):
        raise processes.LocalClusterError(f"the local cluster runs stack {running_stack}: `make local-down` first, "
                                          f"then `make local STACK={stack}`")
    if "kube-apiserver" not in processes.running(state):
        controlplane.check_ports_free()  # before stopping anything: another cluster's ports are not ours
        down(state, quiet=True)
        state.mkdir(parents=True)
        out(f"starting the control plane in {state}")
        controlplane.start(state, context=f"gpucluster-local-{stack}")
        kwok.start(state)
        (state / "stack").write_text(stack)
        out(f"rendering stack {stack} (bootstrap plan --out) and its charts (helm template)")
        rendered = render(stack, state)
        gpu_zone = rendered.report["gpuAvailabilityZone"]
        zone_id = next(z["zoneId"] for z in rendered.report["zones"] if z["name"] == gpu_zone)
        from bootstrap import stackfile

        cfg, _, _ = stackfile.load_stack(stack, PROJECT_DIR, standins=True)
        node_objects = nodes.nodes(cfg, gpu_zone, zone_id, rendered.cluster_name,
                                   kubelet_port=controlplane.PORTS.kwok)
        kubectl.apply(state, node_objects, "KWOK nodes")
        _wait_for_nodes(state, len(node_objects))
        out(f"{len(node_objects)} nodes registered: " + ", ".join(
            f"{g.name} {g.max_nodes} x {g.instance_type}" for g in nodes.node_groups(cfg)))
        out("starting the ProvisioningRequest stand-in for cluster-autoscaler (local/autoscaler/provisioner.py)")
        provisioner.start(state, stack, gpu_zone, zone_id, rendered.cluster_name, controlplane.PORTS.kwok)
    elif "provisioner" not in processes.running(state) and provisioner.spec_path(state).is_file():
        provisioner.restart(state)
    return apply(stack, state, out, rendered)


def down(state: Path, quiet: bool = False, out=print) -> None:
    """Stop every process the state folder started and delete the folder."""
    stopped = processes.stop(state)  # also when the folder is gone: strays are found by their command lines
    shutil.rmtree(state, ignore_errors=True)
    if not quiet:
        out(f"stopped {', '.join(stopped) or 'nothing'}; deleted {state}")
