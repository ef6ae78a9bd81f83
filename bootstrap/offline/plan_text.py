"""The offline plan as text: a preview-like resource tree with key properties, then the report's sections."""

from __future__ import annotations

import json
from typing import Any

from bootstrap.offline import mocks
from bootstrap.offline.plan_report import integral
from components.core.node_updates import ROLL_NOTE
from components.core.placement import plan as placement
from components.core.planning import fleet, goodput, ps_sizing, startup

# EC2 User Guide, "Spot Instance interruption notices"; README, Spot.
SPOT_NOTE = ("    Spot: EC2 may reclaim a node with two minutes' notice; its job restarts from its last checkpoint "
             "(README, Spot)")

# Properties worth a glance in the tree, per resource type.
KEY_PROPERTIES = {
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/subnet:Subnet": ("availabilityZone", "cidrBlock"),
    "aws:ec2/natGateway:NatGateway": (),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("serviceName", "vpcEndpointType"),
    "aws:eks/cluster:Cluster": ("name", "version"),
    "aws:eks/addon:Addon": ("addonName", "addonVersion"),
    "aws:eks/nodeGroup:NodeGroup": ("nodeGroupName", "nodeGroupNamePrefix", "instanceTypes", "capacityType", "amiType",
                                    "releaseVersion", "scalingConfig"),
    "aws:eks/accessEntry:AccessEntry": ("principalArn",),
    "aws:ec2/placementGroup:PlacementGroup": ("strategy",),
    "aws:ec2/launchTemplate:LaunchTemplate": ("networkInterfaces",),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("deploymentType", "storageCapacity", "perUnitStorageThroughput"),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("fileSystemPath", "dataRepositoryPath"),
    "aws:s3/bucket:Bucket": ("bucket",),
    "aws:iam/role:Role": (),
    "kubernetes:helm.sh/v3:Release": ("chart", "version"),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("namespace", "serviceAccount"),
}
def _short(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict) and "networkCardIndex" in value[0]:
        efa = sum(1 for i in value if i.get("interfaceType") in ("efa", "efa-only"))
        return f"{len(value)} interfaces ({efa} EFA)"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(integral(value).items())) + "}"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def resource_tree(recording: mocks.Recording) -> list[str]:
    children: dict[str, list[mocks.Registration]] = {}
    urns = {r.urn for r in recording.resources}
    for r in recording.resources:
        parent = r.parent if r.parent in urns else ""
        children.setdefault(parent, []).append(r)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for r in sorted(children.get(parent, []), key=lambda x: (x.type, x.name)):
            props = [f"{k}={_short(r.inputs[k])}" for k in KEY_PROPERTIES.get(r.type, ()) if k in r.inputs]
            kind = r.inputs.get("kind") if r.type.startswith("kubernetes:") else None
            label = f"{r.type}{f' ({kind})' if kind and 'kind' not in KEY_PROPERTIES.get(r.type, ()) else ''}"
            flags = " [retain]" if r.retain_on_delete else ""
            lines.append(f"{'    ' * depth}+ {label} {r.name}{flags}{'  ' + ' '.join(props) if props else ''}")
            walk(r.urn, depth + 1)

    walk("", 1)
    return lines


def render(report: dict[str, Any], tree: list[str]) -> str:
    out = [f"gpucluster plan: stack {report['stack']} ({report['region']}, GPU zone "
           f"{report['gpuAvailabilityZone']}), offline: mock runtime, nothing is created"]
    if report["standIns"]:
        out += ["", "Not set in the stack (set before `pulumi up`; the plan stands in for them)"]
        out += [f"  {k}: {json.dumps(v)}" for k, v in report["standIns"].items()]
    out += ["", "Zones (by zone ID; names differ per account)"]
    for z in report["zones"] or []:
        roles = [r for r, on in (("GPU pools and FSx", z["gpu"]), ("cluster subnets", z["cluster"])) if on]
        refused = "" if z["cluster"] or not z["gpu"] else " (EKS refuses this zone ID for the control plane)"
        out.append(f"  {z['name']} = {z['zoneId']}: {', '.join(roles)}{refused}")
    out += ["", "Resources"]
    out += tree
    out += ["", "Counts by type"]
    width = max((len(t) for t in report["countsByType"]), default=10)
    out += [f"  {t:<{width}}  {n:>3}" for t, n in report["countsByType"].items()]
    out += [f"  {'total':<{width}}  {report['resourceCount']:>3}", "", "GPU pools"]
    for p in report["gpuPools"]:
        fabric = (f"{p['efaInterfaces']} EFA, {p['networkGbps']:g} Gbps" if p["efaInterfaces"] else "no EFA")
        out.append(f"  {p['name']}: {p['instanceType']} ({p['gpusPerNode']}x {p['gpuModel']}), "
                   f"{p['minNodes']}-{p['maxNodes']} nodes (up to {p['gpusMax']} GPUs), {fabric}, "
                   f"placement: {p['placement']}, {p['capacityType']}, "
                   f"${p['costPerHourMin']:,.2f}/h at min, ${p['costPerHourMax']:,.2f}/h at max")
        if len(p["instanceTypes"]) > 1:
            out.append(f"    also launches {', '.join(p['instanceTypes'][1:])} when {p['instanceType']} has no Spot "
                       "capacity" + (" (more types in a cluster placement group: more insufficient-capacity "
                                     "errors)" if p["placement"] != "none" else ""))
        if p["interruptible"]:
            out.append(SPOT_NOTE)
    if report["cpuPools"]:
        out += ["", "CPU pools"]
    for p in report["cpuPools"]:
        users = ", ".join(p["parameterServersOf"]) or "no job"
        out.append(f"  {p['name']}: {p['instanceType']} ({p['vcpus']} vCPUs, {p['memoryGiB']:g} GiB), "
                   f"{p['minNodes']}-{p['maxNodes']} nodes, {p['capacityType']}, parameter servers of: {users}, "
                   f"${p['costPerHourMin']:,.2f}/h at min, ${p['costPerHourMax']:,.2f}/h at max")
        if len(p["instanceTypes"]) > 1:
            out.append(f"    also launches {', '.join(p['instanceTypes'][1:])} when {p['instanceType']} has no Spot "
                       "capacity")
        if p["interruptible"]:
            out.append(SPOT_NOTE)
    out += _later_ups(report.get("laterUps"))
    s = report["storage"]
    tier = f", {s['throughputPerTiB']} MB/s/TiB" if s["throughputPerTiB"] else ""
    out += ["", "Storage",
            f"  FSx for Lustre {s['deploymentType']} {s['storageCapacityGiB']} GiB{tier}: "
            f"aggregate {s['aggregateThroughputMBps']:,.0f} MB/s for up to {s['gpusAtMaxScale']} GPUs"]
    if s["warning"]:
        out.append(f"  WARNING: {s['warning']}")
    if (ident := report.get("jobIdentity")) is not None:
        out += ["", "Jobs' AWS identity (EKS Pod Identity)",
                f"  role {ident['role']}: every pod in {ident['namespace']} (service account "
                f"{ident['namespace']}/{ident['serviceAccount']})"]
        out += [f"  {', '.join(st['actions'])} on {st['resource']}" for st in ident["s3"]]
        out.append(f"  and {', '.join(ident['policyArns'])}" if ident["policyArns"] else
                   "  nothing else (gpucluster:jobPolicyArns adds managed policies)")
        out.append(f"  credentials from the Pod Identity agent at {ident['credentials']}, the one link-local "
                   "address the NetworkPolicies open")
    out += _time_to_ready(report["timeToReady"])
    out += _teams(report.get("teams"))
    out += ["", "Jobs (queued in Kueue; start order per pool by priority, then as listed)"]
    for j in report["jobs"]:
        line = (f"  {j['name']}: {j['launcher']} on {j['pool']}, {j['nodes']} node{'' if j['nodes'] == 1 else 's'}, "
                f"{j['gpus']} GPU{'' if j['gpus'] == 1 else 's'}")
        if j.get("parameterServers"):
            ps = j["parameterServers"]
            line += (f", {ps['replicas']} parameter server{'' if ps['replicas'] == 1 else 's'} on {ps['pool']} "
                     "and a chief on the system nodes")
        line += f"; queue {j['queue']}, priority {j['priority']}"
        if not j["startOnUp"]:
            line += ", starts with `python -m bootstrap submit` (startOnUp: false)"
        elif j["startOrder"] is None:
            line += ", never starts (larger than its pool)"
        elif j["startsAfter"]:
            line += f", starts #{j['startOrder']} after {', '.join(j['startsAfter'])} end"
        else:
            line += f", starts #{j['startOrder']} at once"
        td = j["teardown"]
        deadline = td.get("deadlineSeconds")
        line += f"; deadline {_duration(deadline)}" if deadline else "; no deadline"
        if td.get("deadlineFrom"):
            line += f" ({td['deadlineFrom']})"
        if "worstCaseCostUsd" in td:
            worst = td["worstCaseCostUsd"]
            line += (f", worst case ${worst:,.0f} incl. {td['idleRemovalMinutes']} min idle tail" if worst is not None
                     else ", worst case unbounded (set maxCostUsd or runPolicy.activeDeadlineSeconds)")
        if j["sizing"]:
            z = j["sizing"]
            line += f"; model state {z['model_state_gb_per_gpu']:.1f} GB/GPU, fits: {'yes' if z['fits'] else 'no'}"
            if z.get("training_days") is not None:
                line += f", {z['training_days']:.1f} days"
            if z.get("cost_usd") is not None:
                line += f", ${z['cost_usd']:,.0f}"
        out.append(line)
        if j.get("timeToFirstStep"):
            out.append(f"    {startup.render(startup.TimeToFirstStep(**j['timeToFirstStep']))}")
        if j.get("psSizing"):
            out.append(f"    {ps_sizing.render(ps_sizing.PsSizing(**j['psSizing']))}")
    if not report["jobs"]:
        out.append("  (none)")
    now = report["startsNow"]
    if now["jobs"]:
        started = ", ".join(f"{j['nodes']} x {j['instanceType']} ({j['job']})" for j in now["jobs"])
        out.append(f"  `pulumi up` starts at once: {started}: ${now['perHour']:,.2f}/h while they run")
    else:
        out.append("  `pulumi up` starts no job: nothing bills for GPUs until one is submitted")
    out += placement.render(report.get("placement"))
    out += goodput.render(report.get("goodput"))
    out += _monitoring(report.get("monitoring"))
    c = report["cost"]
    out += ["", "Estimated on-demand cost (USD/hour)"]
    out += [f"  {x['item']}: {x['minPerHour']:,.2f} - {x['maxPerHour']:,.2f}" for x in c["lines"]]
    out += [f"  total at minimum scale: {c['minPerHour']:,.2f} (${c['minPerMonth']:,.0f} a month)",
            f"  total at maximum scale: {c['maxPerHour']:,.2f} (${c['maxPerMonth']:,.0f} a month)",
            f"  total while paused (every GPU pool at 0, reservations still billed): {c['pausedPerHour']:,.2f} "
            f"(${c['pausedPerHour'] * 730:,.0f} a month)"]
    out += ["  not included: " + "; ".join(c["notIncluded"])]
    out += fleet.render(report.get("fleet"))  # nothing outside a fleet
    pause = report["paused"]
    if pause["paused"]:
        out += ["", f"PAUSED ({pause['pauseMode']}): the ClusterQueue has stopPolicy {pause['stopPolicy']} and every "
                    "GPU pool may scale to 0; `python -m bootstrap resume` ends it"]
    if report["warnings"]:
        out += ["", "Warnings"] + [f"  {w}" for w in report["warnings"]]
    violations = report.get("policyViolations") or []
    out += ["", f"Policy pack (policy/, what `pulumi preview --policy-pack policy` reports): "
                f"{len(violations) or 'no'} violation{'' if len(violations) == 1 else 's'}"]
    out += [f"  {v['level']} {v['policy']}: {v['message']}" for v in violations]
    out += ["", "Outputs (the mock runtime's: ids, DNS names and random suffixes marked * are stand-ins)"]
    out += [f"  {k}: {v if isinstance(v, str) else json.dumps(v)}{' *' if k in mock_outputs(report) else ''}"
            for k, v in report["outputs"].items()]
    return "\n".join(out)


# Outputs AWS makes up at creation: the offline plan can only show stand-ins (bootstrap/offline/mocks.py).
MOCK_OUTPUTS = ("vpcId", "fileSystemId", "fileSystemDnsName", "fileSystemMountName", "bucketName")


def mock_outputs(report: dict[str, Any]) -> set[str]:
    outputs = report["outputs"]
    # An adopted bucket's name is the stack's own (storage.bucketName), not a random suffix.
    adopted = outputs.get("bucketRetainedOnDestroy") is True and not str(outputs.get("bucketName", "")).startswith(
        f"gpucluster-{report['stack']}-data-")
    return {k for k in MOCK_OUTPUTS if k in outputs and not (k == "bucketName" and adopted)}


def _monitoring(m: dict[str, Any] | None) -> list[str]:
    if m is None:
        return ["", "Monitoring: off (gpucluster:observability.enabled: false)"]
    p, cost = m["prometheus"], m["costPerHour"]
    out = ["", "Monitoring (README \"Watch a job\")",
           f"  kube-prometheus-stack {m['charts']['kube-prometheus-stack']} on the system nodes: Prometheus "
           f"({p['retentionDays']} d on a {p['volumeGiB']} GiB gp3 volume, ${cost['ebs']:.4f}/h; ~{p['series']:,} "
           f"series at maxNodes, {p['memory']}), Grafana, Alertmanager "
           f"({', '.join(m['receivers']) or 'no receiver: its UI'}), node-exporter, kube-state-metrics",
           f"  dcgm-exporter {m['charts']['dcgm-exporter']} on GPU pools: {', '.join(m['gpuExporterPools']) or '-'}; "
           f"EFA counters on: {', '.join(m['efaCounterPools']) or '- (no EFA pool)'}",
           f"  scraped: {', '.join(m['scraped'])}",
           f"  dashboards: {', '.join(m['dashboards'])}",
           f"  alerts: {', '.join(m['alerts'])}"]
    if m["tensorboard"]:
        out.append("  TensorBoard on the system nodes, serving every job's GPUCLUSTER_TENSORBOARD_DIR read-only")
    out.append("  remote write: " + ("Amazon Managed Service for Prometheus, a new workspace, "
                                     f"~${cost['amp']:.2f}/h at maxNodes" if m["remoteWrite"] == "amp" else "off"))
    out += [f"  {name}: {command}" for name, command in m["portForward"].items()]
    return out


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _teams(t: dict[str, Any] | None) -> list[str]:
    """The teams' shares (components.core.teams.plan); nothing for a stack without teams."""
    if t is None:
        return []
    out = ["", f"Teams (Kueue cohort {t['cohort']}: a guarantee each, borrowing what the others leave idle, fair "
               "sharing by weight; README, Teams)"]
    for team in t["teams"]:
        budget = team["monthlyBudgetUsd"]
        out.append(f"  {team['name']}: namespace {team['namespace']}, weight {team['weight']:g}, "
                   f"{_plural(team['members'], 'member')}, priority classes {', '.join(team['priorityClasses'])}")
        for p in team["pools"]:
            limit = " (its borrowLimitGpus)" if p["borrowLimitGpus"] is not None and \
                p["borrowableGpus"] == p["borrowLimitGpus"] else ""
            out.append(f"    {p['pool']}: guaranteed {_plural(p['guaranteedGpus'], 'GPU')} "
                       f"({_plural(p['guaranteedNodes'], 'node')}), borrows up to {_plural(p['borrowableGpus'], 'GPU')}"
                       f"{limit}, lends up to {_plural(p['lendableGpus'], 'GPU')}; ${p['pricePerGpuHour']:,.2f}/GPU-h")
        out.append(f"    worst case ${team['worstCaseMonthlyUsd']:,.0f} a month (its guarantee and all it may borrow, "
                   f"{t['hoursPerMonth']} h); budget " + (f"${budget:,.0f} a month" if budget is not None else "none"))
    rest = t["trainingNamespace"]
    kept = ", ".join(f"{p['pool']} {_plural(p['gpus'], 'GPU')} ({_plural(p['nodes'], 'node')})" for p in rest["pools"])
    out.append(f"  {rest['namespace']} (the training namespace: the fabric test, jobs without a team) keeps {kept}, "
               "lent while idle")
    out += [f"  WARNING: {w}" for w in t["warnings"]]
    return out


def _time_to_ready(r: dict) -> list[str]:
    """The critical path the plan computed through the program's dependencies, and its parallel bound."""
    out = ["", "Time to ready (`pulumi up` from nothing, along the program's dependencies; estimates)",
           f"  ~{r['criticalPathMinutes']:g} min; with only the waits each step needs ~{r['boundMinutes']:g} min "
           f"(ratio {r['ratio']:.2f}). Critical path:"]
    for step in r["criticalPath"]:
        alongside = f" (as long: {', '.join(step['alongside'])})" if step["alongside"] else ""
        why = f": {step['why']}" if step["why"] else ""
        out.append(f"    by {step['finishMinutes']:>2g} min  {step['name']} +{step['minutes']:g}{alongside}{why}")
    out.append(f"  in parallel: FSx ~{r['storageMinutes']} min with {r['s3Link']}")
    for waiting, waited in r["unneededWaits"]:
        out.append(f"  WARNING: {waiting} waits for {waited} without needing it: the path is longer than it has to be")
    return out


def _later_ups(later: dict[str, list[str]] | None) -> list[str]:
    """Which config changes restart a deployed pool's nodes (components.core.node_updates)."""
    if not later:
        return []
    return ["", "Later `pulumi up`s of the deployed stack",
            f"  {ROLL_NOTE}: every node of a pool is replaced (a new launch template version or AMI release) "
            f"when its {', '.join(later['restartGpuPoolKeys'])} (CPU pools: {', '.join(later['restartCpuPoolKeys'])}) "
            f"or the stack's {', '.join(later['restartStackKeys'])} change; `bootstrap diff` names each one",
            f"  in place, the pools' nodes stay: {', '.join(later['inPlace'])} (tags reach nodes launched after the change)"]


def _duration(seconds: int) -> str:
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    return " ".join(f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m")) if n) or f"{seconds}s"
