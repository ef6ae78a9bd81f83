"""What the offline plan says, as data: pools, storage, jobs, time to ready, cost, every resource (pure).

`build_report` turns a mock run's recording into one JSON-able dict; two
plans of one stack give identical bytes, so `bootstrap diff` compares them.
Secret inputs are masked: the report is printed, uploaded and diffed.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from bootstrap import stackfile
from bootstrap.offline import mocks
from components.core import config, node_updates
from components.core.placement import plan as placement
from components.core.planning import goodput
from policy.rules import check_recording

SECRET = "[secret]"
_NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:yaml", "pulumi:providers:")

def integral(value: Any) -> Any:
    """2.0 -> 2: the engine's wire format carries every number as a double."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


def kubernetes_objects(recording: mocks.Recording) -> list[dict[str, Any]]:
    """Every plain Kubernetes object registered (Helm releases and providers excluded)."""
    objects = []
    for r in recording.resources:
        if not r.type.startswith("kubernetes:") or r.type.startswith(_NOT_OBJECTS):
            continue
        objects.append(integral({k: v for k, v in r.inputs.items() if not k.startswith("__")}))
    return objects


def pool_rows(cfg: config.StackConfig) -> list[dict[str, Any]]:
    from components.core.hardware import efa

    rows = []
    for pool in cfg.gpu_pools:
        t = pool.instance
        efa_count = efa.efa_interface_count(t, pool.efa_enabled)
        price = cfg.price(pool.instance_type)
        rows.append({
            "name": pool.name, "instanceType": pool.instance_type, "gpuModel": t.gpu_model,
            "gpusPerNode": t.gpu_count, "minNodes": pool.min_nodes, "maxNodes": pool.max_nodes,
            "gpusMax": t.gpu_count * pool.max_nodes, "efaInterfaces": efa_count,
            "networkGbps": t.network_gbps if efa_count else None,
            "placement": "cluster placement group" if pool.uses_placement_group else "none",
            "capacityType": pool.capacity_type, "pricePerNodeHour": price,
            "costPerHourMin": round(pool.min_nodes * price, 2), "costPerHourMax": round(pool.max_nodes * price, 2),
            "instanceTypes": list(pool.instance_types), "interruptible": pool.is_spot,
        })
    return rows


def cpu_pool_rows(cfg: config.StackConfig) -> list[dict[str, Any]]:
    rows = []
    for pool in cfg.cpu_pools:
        t, price = pool.instance, cfg.price(pool.instance_type)
        users = [j.name for j in cfg.jobs if j.launcher == "ps" and j.ps_pool == pool.name]
        rows.append({
            "name": pool.name, "instanceType": pool.instance_type, "vcpus": t.vcpus, "memoryGiB": t.memory_gib,
            "minNodes": pool.min_nodes, "maxNodes": pool.max_nodes, "capacityType": pool.capacity_type,
            "interruptible": pool.is_spot, "instanceTypes": list(pool.instance_types), "parameterServersOf": users,
            "costPerHourMin": round(pool.min_nodes * price, 2), "costPerHourMax": round(pool.max_nodes * price, 2),
        })
    return rows


def storage_summary(cfg: config.StackConfig) -> dict[str, Any]:
    from components.core.storage import fsx

    fs = cfg.storage.fsx
    gpus = sum(p.instance.gpu_count * p.max_nodes for p in cfg.gpu_pools)
    return {
        "deploymentType": fs.deployment_type,
        "storageCapacityGiB": fs.storage_capacity_gib,
        "throughputPerTiB": fs.throughput_per_tib,
        "aggregateThroughputMBps": round(fs.aggregate_throughput_mbps, 1),
        "gpusAtMaxScale": gpus,
        "warning": fsx.throughput_warning(fs, gpus, cfg.storage.read_target_mbps_per_gpu),
    }


def job_identity_summary(cfg: config.StackConfig, recording: mocks.Recording) -> dict[str, Any] | None:
    """The jobs' role as registered: its name, the bucket statements of its inline policy, the stack's policies."""
    import json

    from components.core import job_identity

    roles = [r.name for r in recording.resources if r.type == "aws:iam/role:Role" and r.name.endswith("-job-identity-role")]
    access = [r for r in recording.resources
              if r.type == "aws:iam/rolePolicy:RolePolicy" and r.name.endswith("-job-identity-bucket-access")]
    if not roles or not access or not isinstance(access[0].inputs.get("policy"), str):
        return None
    return {
        "role": roles[0], "namespace": cfg.training_namespace, "serviceAccount": job_identity.SERVICE_ACCOUNT,
        "s3": [{"actions": st["Action"], "resource": st["Resource"]}
               for st in json.loads(access[0].inputs["policy"])["Statement"]],
        "policyArns": list(cfg.job_policy_arns),
        "credentials": f"{job_identity.AGENT_IPV4}:{job_identity.AGENT_PORT} ([{job_identity.AGENT_IPV6}]"
                       f":{job_identity.AGENT_PORT})",
    }


def job_rows(cfg: config.StackConfig) -> list[dict[str, Any]]:
    """Each job (and fabric test) with its queue, start order, deadline and worst-case cost."""
    from components.core.kube import admission, launcher, queueing
    from components.core.planning import jobsizing, ps_sizing, teardown

    starts = admission.stack_schedule(cfg)
    queue = f"{cfg.training_namespace}/{queueing.LOCAL_QUEUE}"
    rows = []
    for pool in cfg.gpu_pools:
        if pool.fabric_test:
            name = launcher.nccl_test_name(pool)
            rows.append({"name": name, "launcher": "mpirun (fabric test)", "pool": pool.name, "startOnUp": True,
                         "nodes": launcher.FABRIC_TEST_NODES, "gpus": launcher.FABRIC_TEST_NODES * pool.instance.gpu_count,
                         "queue": queue, "priority": queueing.FABRIC_TEST_PRIORITY, **_start(starts, name),
                         "teardown": {"deadlineSeconds": launcher.FABRIC_TEST_DEADLINE_SECONDS},
                         "sizing": None})
    for job in cfg.jobs:
        pool = cfg.pool(job.pool)
        gpus = job.gpus_per_node or pool.instance.gpu_count
        # A team's job queues in its team's namespace (components.core.teams.queues.local_queue).
        row = {"name": job.name, "launcher": job.launcher, "pool": job.pool, "nodes": job.nodes,
               "gpus": job.nodes * gpus, "queue": f"{cfg.namespace_of(job)}/{queueing.LOCAL_QUEUE}",
               "priority": job.priority_class,
               "startOnUp": job.start_on_up,
               **_start(starts, job.name), "teardown": teardown.teardown(job, cfg).to_dict(), "sizing": None,
               "parameterServers": ({"pool": job.ps_pool, "replicas": job.ps_replicas} if job.launcher == "ps"
                                    else None)}
        pulling = job.nodes + (job.ps_replicas if job.launcher == "ps" else 0)
        row["timeToFirstStep"] = goodput.first_step(cfg, job, pulling).to_dict()
        if job.model is not None:
            row["sizing"] = jobsizing.size_job(job, pool, cfg.prices).to_dict()
            if job.launcher == "ps":
                row["psSizing"] = ps_sizing.size_ps(job.model.params, job.ps_replicas, job.nodes,
                                                    cfg.cpu_pool(job.ps_pool).instance_type).to_dict()
        rows.append(row)
    return rows


def starts_now(cfg: config.StackConfig, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """What `pulumi up` starts at once (the jobs Kueue admits first), and what those nodes cost per hour."""
    lines, total = [], 0.0
    for row in jobs:
        if row["startOnUp"] and row["startOrder"] is not None and not row["startsAfter"]:
            pool = cfg.pool(row["pool"])
            per_hour = row["nodes"] * cfg.price(pool.instance_type)
            total += per_hour
            lines.append({"job": row["name"], "nodes": row["nodes"], "instanceType": pool.instance_type,
                          "perHour": round(per_hour, 2)})
    return {"jobs": lines, "perHour": round(total, 2)}


def _start(starts: dict, name: str) -> dict[str, Any]:
    start = starts.get(name)
    return {"startOrder": start.order if start else None, "startsAfter": start.after if start else None}


def time_to_ready(cfg: config.StackConfig, recording: mocks.Recording) -> dict[str, Any]:
    """The critical path through the recorded graph (bootstrap.offline.time_to_ready), its parallel bound,
    and the storage path beside it."""
    from bootstrap.offline import time_to_ready as ttr
    from components.core.storage import fsx

    result = ttr.compute(recording.resources)
    link = ("one data repository association (the bucket at /), created after the file system"
            if cfg.storage.s3_link else "no S3 link")
    return integral({
        "criticalPathMinutes": result.modelled, "boundMinutes": result.bound, "ratio": result.ratio,
        "criticalPath": [{"name": s.name, "kind": s.kind, "minutes": s.minutes, "finishMinutes": s.finish,
                          "why": s.why, "alongside": list(s.alongside)} for s in result.steps],
        "unneededWaits": [list(pair) for pair in result.unneeded],
        "eksMinutes": ttr.EKS_MINUTES, "storageMinutes": fsx.time_to_ready_minutes(cfg.storage), "s3Link": link,
    })


def monitoring_summary(cfg: config.StackConfig) -> dict[str, Any] | None:
    """What `observability` installs, what it costs and where to look (None when it is off)."""
    from components.core import versions as v
    from components.core.observability import access, alerts, dashboards
    from components.core.planning.metrics_footprint import footprint

    obs = cfg.observability
    if not obs.enabled:
        return None
    fp = footprint(cfg)
    return {
        "charts": {"kube-prometheus-stack": v.KPS_CHART_VERSION, "dcgm-exporter": v.DCGM_CHART_VERSION},
        "prometheus": {"retentionDays": fp.retention_days, "volumeGiB": fp.volume_gib, "series": fp.series,
                       "memory": fp.prometheus_resources["requests"]["memory"]},
        "gpuExporterPools": [p.name for p in cfg.gpu_pools],
        "efaCounterPools": [p.name for p in cfg.gpu_pools if p.efa_enabled],
        "scraped": [s for s in access.SCRAPED if s != "EFA counters" or any(p.efa_enabled for p in cfg.gpu_pools)],
        "dashboards": [key.removesuffix(".json") for key in dashboards.dashboard_keys(cfg)],
        "alerts": sorted({r["alert"] for r in alerts.alert_rules(cfg)}),
        "receivers": [name for name, on in (("SNS", obs.alert_sns_topic_arn), ("Slack",
                                                                              cfg.alert_slack_webhook_url)) if on],
        "tensorboard": obs.tensorboard,
        "remoteWrite": obs.remote_write,
        "costPerHour": {"ebs": round(fp.ebs_usd_per_hour, 4), "amp": round(fp.amp_usd_per_hour, 4)},
        "portForward": access.port_forwards(cfg),
    }


# components.core.planning.cost.pool_line's note on a reserved pool: the Capacity Block's instance count as
# looked up (not "(assumed maxNodes)", an ODCR's, which no lookup counts).
_RESERVATION = re.compile(r"^GPU pool (\S+) .*\breservation of (\d+) billed whether used or not(?! \(assumed)")


def reserved_nodes(recording: mocks.Recording) -> dict[str, int]:
    """Each Capacity Block pool's instance count, as the program's cost estimate took it from the lookup."""
    lines = (recording.stack_outputs.get("estimatedCostPerHourUsd") or {}).get("lines") or []
    found = (_RESERVATION.match(line.get("item", "")) for line in lines)
    return {m[1]: int(m[2]) for m in found if m}


def teams_summary(cfg: config.StackConfig, recording: mocks.Recording) -> dict[str, Any] | None:
    """Each team's guaranteed and borrowable GPUs per pool, its worst-case month and the warnings; None
    without teams, so a stack without them plans as before."""
    from components.core.teams import plan as teams

    summary = teams.plan(cfg, reserved_nodes(recording))
    return None if summary is None else integral(summary.to_dict())


def build_report(cfg: config.StackConfig, recording: mocks.Recording, standins: list[str]) -> dict[str, Any]:
    """Everything the plan says, deterministic: two plans of one stack are byte-identical."""
    outputs = {k: ("[secret]" if k in recording.secret_outputs else v) for k, v in recording.stack_outputs.items()}
    estimate = recording.stack_outputs.get("estimatedCostPerHourUsd") or {}
    report = {
        "stack": cfg.stack,
        "region": cfg.region,
        "gpuAvailabilityZone": recording.stack_outputs.get("gpuAvailabilityZone"),
        "zones": recording.stack_outputs.get("zones"),
        "standIns": {key: stackfile.PLAN_STANDINS[key] for key in standins},
        "resourceCount": sum(1 for r in recording.resources if r.custom),
        "countsByType": dict(sorted(Counter(r.type for r in recording.resources if r.custom).items())),
        "gpuPools": pool_rows(cfg),
        "cpuPools": cpu_pool_rows(cfg),
        "storage": storage_summary(cfg),
        "laterUps": node_updates.later_ups(),
        "jobIdentity": job_identity_summary(cfg, recording),
        "timeToReady": time_to_ready(cfg, recording),
        "jobs": (jobs := job_rows(cfg)),
        "startsNow": starts_now(cfg, jobs),
        "placement": integral(placement.plan(cfg, reserved_nodes(recording)).to_dict()),
        "goodput": integral(goodput.plan(cfg)),
        "cost": {"minPerHour": estimate.get("min"), "maxPerHour": estimate.get("max"),
                 "minPerMonth": estimate.get("minPerMonth"), "maxPerMonth": estimate.get("maxPerMonth"),
                 "pausedPerHour": estimate.get("paused"), "lines": estimate.get("lines", []),
                 "notIncluded": estimate.get("notIncluded", [])},
        "monitoring": monitoring_summary(cfg),
        "paused": {"paused": cfg.paused, "pauseMode": cfg.pause_mode, "stopPolicy": cfg.stop_policy},
        "outputs": outputs,
        "resources": resource_rows(recording),
        "warnings": sorted(msg for level, msg in recording.logs if level in ("warning", "warn")),
        # What `pulumi preview --policy-pack policy` would report, from the same rules.
        "policyViolations": [v.to_dict() for v in check_recording(recording.resources, cfg.stack)],
    }
    if (teams := teams_summary(cfg, recording)) is not None:
        report["teams"] = teams
    return report


def resource_rows(recording: mocks.Recording) -> list[dict[str, Any]]:
    """Every resource with its inputs (secrets masked) and options, in URN order (registration order is
    not stable)."""
    rows = [{"type": r.type, "name": r.name, "urn": r.urn, "parent": r.parent, "custom": r.custom,
             "inputs": integral(masked(r.inputs, r.secret_inputs)), "dependencies": sorted(r.dependencies),
             "protect": r.protect, "retainOnDelete": r.retain_on_delete, "ignoreChanges": sorted(r.ignore_changes),
             "replaceOnChanges": sorted(r.replace_on_changes), "deleteBeforeReplace": r.delete_before_replace,
             "importId": r.import_id, "hooks": r.hooks} for r in recording.resources]
    return sorted(rows, key=lambda row: row["urn"])


def masked(value: Any, secret_paths: set[str], path: str = "") -> Any:
    """`value` with every input the program marked secret replaced by "[secret]"."""
    if path in secret_paths:
        return SECRET
    if isinstance(value, dict):
        return {k: masked(v, secret_paths, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v, secret_paths, f"{path}[{i}]") for i, v in enumerate(value)]
    return value
