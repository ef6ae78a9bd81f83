"""The plan's Fleet section as text (pure): nothing for a stack in no fleet."""

from __future__ import annotations

from typing import Any

DISPATCHING = {"all-at-once": "a copy of each job to every worker, the first whose queue admits it runs it",
               "incremental": "each job to 3 workers at a time, in the order listed, until one admits it"}


def _money(value: float | None, unknown: str) -> str:
    return unknown if value is None else f"${value:,.2f}"


def _worker_side(f: dict[str, Any]) -> list[str]:
    listed = {True: "its stack file lists this stack among its workers",
              False: "WARNING: its stack file does not list this stack: add it to the manager's "
                     "gpucluster:fleet.workers, or jobs never arrive here",
              None: "its stack file is not in this folder: not checked that it lists this stack"}[f["listedByManager"]]
    jobs = ", ".join(f["submittable"]) or "none (a job with startOnUp: false)"
    return ["", f"Fleet: a worker of fleet {f['manager']} (README, A fleet of clusters)",
            f"  the manager {f['manager']} may send this cluster jobs: its queue (Kueue MultiKueue) dispatches them "
            f"to the first worker that admits them; {listed}",
            f"  `{f['submit']}` queues a job of this stack on the manager (this stack's: {jobs})"]


def _data(d: dict[str, Any]) -> list[str]:
    out = []
    if d["mode"] == "shared-bucket":
        out.append(f"  Data (shared-bucket): a job's dataset and checkpoints live in one S3 bucket in "
                   f"{d['bucketRegion']} that every worker reads and writes (each worker's FSx stays in its own "
                   "region), so a job can start or resume on any worker; a worker in another region pays, per GB, "
                   "inter-region transfer and its NAT gateway's processing (an S3 gateway endpoint serves only its "
                   "own region)")
        for w in d["workers"]:
            if not w["crossesRegions"]:
                out.append(f"    {w['stack']} ({w['region']}): the bucket's region, no transfer charge")
                continue
            out.append(f"    {w['stack']} ({w['region']}): reads ${w['readPerGB']:.3f}/GB ({d['bucketRegion']} -> "
                       f"{w['region']}), writes ${w['writePerGB']:.3f}/GB ({w['region']} -> {d['bucketRegion']}), "
                       f"each + ${w['natPerGB']:.3f}/GB NAT processing; the {d['datasetGiB']:,g} GiB dataset read at "
                       f"each job start: {_money(w['perJobStartUsd'], '-')}")
            out += [_checkpoint(j, resume=True) for j in w["jobs"]]
    else:
        ds = d["dataset"]
        to = ", ".join(f"{x['to']} (${x['perGB']:.3f}/GB)" for x in ds["to"]) or "no other region"
        out.append(f"  Data (replicated): a bucket in each of {', '.join(d['regions'])}; S3 Replication copies each "
                   "object written in one to each of the others, once, asynchronously; a job reads and writes its "
                   "own region's bucket (a resume elsewhere finds the checkpoints that have arrived)")
        out.append(f"    dataset {d['datasetGiB']:,g} GiB, uploaded to {ds['from']}, replicated to {to}: "
                   f"{_money(ds['onceUsd'], '-')} once (again for each new version); job starts read it locally")
        for w in d["workers"]:
            out.append(f"    {w['stack']} ({w['region']}): each GiB written crosses to "
                       f"{', '.join(w['replicatesTo']) or 'no other region'} (${w['writePerGB']:.3f}/GB)")
            out += [_checkpoint(j, resume=False) for j in w["jobs"]]
    defaulted = f"; ${d['defaultPerGB']:.2f}/GB assumed for {', '.join(d['defaultedSources'])}" \
        if d["defaultedSources"] else ""
    out.append(f"    an estimate: {d['source']}{defaulted}")
    out.append("    not included: " + "; ".join(d["notIncluded"]))
    return out


def _checkpoint(j: dict[str, Any], resume: bool) -> str:
    if j["checkpointGiB"] is None:
        return (f"      job {j['job']}: checkpoint size unknown (set jobs[].checkpoint.sizeGiB, or model): no "
                "checkpoint cost shown")
    line = (f"      job {j['job']}: a {j['checkpointGiB']:,g} GiB checkpoint every {j['everyMinutes']} min: "
            f"{_money(j['perCheckpointUsd'], '-')} each written, {_money(j['perDayUsd'], '-')} a day of running")
    return line + (f", {_money(j['perResumeUsd'], '-')} read back on a resume" if resume else "")


def render(f: dict[str, Any] | None) -> list[str]:
    """The Fleet section: the manager's workers, cost and data; a worker's manager; [] outside a fleet."""
    if f is None:
        return []
    if f["role"] == "worker":
        return _worker_side(f)
    out = ["", f"Fleet: manager of {len(f['workers'])} worker{'' if len(f['workers']) == 1 else 's'} "
               "(Kueue MultiKueue; README, A fleet of clusters)",
           f"  dispatcher {f['dispatcher']} ({f['dispatcherName']}): {DISPATCHING[f['dispatcher']]}",
           f"  a worker lost for {f['workerLostMinutes']} min (workerLostMinutes) has its jobs requeued for the "
           f"others; each worker's token is renewed every {f['tokenRotationHours']} h and lives "
           f"{2 * f['tokenRotationHours']} h"]
    for w in f["workers"]:
        paused = ", PAUSED" if w["paused"] else ""
        out.append(f"  {w['stack']} ({w['region']}, cluster {w['cluster']}{paused}):")
        out += [f"    {p['name']}: {p['instanceType']} ({p['gpusPerNode']}x {p['gpuModel']}), "
                f"{p['minNodes']}-{p['maxNodes']} nodes, {p['capacityType']}" for p in w["pools"]]
        if not w["pools"]:
            out.append("    no GPU pool")
    gpus = ", ".join(f"{n} {model}" for model, n in f["gpusMax"].items()) or "none"
    out.append(f"  GPUs at maximum scale: {gpus}")
    c = f["cost"]
    out.append("  Fleet cost (USD/hour, each stack's on-demand estimate as its own plan gives it):")
    out += [f"    {r['stack']} ({r['role']}, {r['region']}): {r['minPerHour']:,.2f} - {r['maxPerHour']:,.2f}"
            for r in c["stacks"]]
    out += [f"    total at minimum scale: {c['minPerHour']:,.2f} (${c['minPerMonth']:,.0f} a month)",
            f"    total at maximum scale: {c['maxPerHour']:,.2f} (${c['maxPerMonth']:,.0f} a month)",
            "    not included: as each stack's estimate (above), and the data transfer below"]
    return out + _data(f["data"])
