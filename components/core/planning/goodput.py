"""Expected goodput per job: of the time its nodes are paid for, the share that trains (pure, for the plan).

For each of the stack's jobs (a pool's fabric test is no training job), over its run time (the model
sizing's, from `model.tokens`) or else over a day of running:

- checkpointing: each checkpoint takes its size at the FSx file system's throughput, which is provisioned
  for reads and writes alike (FSx API Reference, CreateFileSystemLustreConfiguration PerUnitStorageThroughput:
  "the amount of read and write throughput for each 1 tebibyte"; only reads burst above it, FSx for Lustre
  User Guide, "Performance characteristics of SSD and HDD storage classes"); the job is assumed to wait while
  it writes (an asynchronous checkpoint hides most of it): write time / interval of the training time;
- failures: `observability.goodput.nodeFailuresPerDay` per node per day x the job's nodes x its days; each
  loses half a checkpoint interval of work on average and a restart: a replacement node's first step
  (startup.time_to_first_step for one node: scale-up, boot, plugins, image) and reading the checkpoint back;
- the first start: startup.time_to_first_step for all its nodes, as the plan's jobs show it.

goodput = training / (training + checkpointing + lost work + first start + restarts). The interval that
maximises it is sqrt(2 x write time x MTBF), MTBF = 1 / (failures per node-day x nodes): Young, "A first
order approximation to the optimum checkpoint interval", CACM 17(9), 1974; Daly, "A higher order estimate
of the optimum checkpoint interval for restart dumps", FGCS 22(3), 2006, whose higher-order terms vanish
while a write takes far less than the MTBF. It is this model's exact optimum (checkpointing falls as 1/interval,
lost work grows with it), then rounded to the whole minutes `checkpoint.everyMinutes` takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from components.core import images
from components.core.config import JobConfig, StackConfig
from components.core.config.observability import NODE_FAILURES_PER_DAY_DEFAULT
from components.core.planning import jobsizing, sizing, startup

# A checkpoint holds bf16 weights (2 bytes a parameter) and Adam's fp32 master weights, momentum and
# variance (12), not the gradients: 14 bytes (sizing.py's ZeRO figures).
CHECKPOINT_BYTES_PER_PARAM = sizing.WEIGHT_BYTES + sizing.OPTIMIZER_BYTES
GIB = 2**30
MB = 1e6  # FSx quotes decimal MB/s
DAY_MINUTES = 1440
EVERY_MINUTES_RANGE = (1, 1440)  # jobs[].checkpoint.everyMinutes
WARN_POINTS = 5  # warn when the configured interval costs more goodput than this against the best one
LLAMA3 = "Meta's Llama 3 run on H100s: 419 unexpected interruptions in 54 days on 2,048 nodes"


@dataclass(frozen=True)
class JobGoodput:
    name: str
    pool: str
    nodes: int
    gpus: int  # the nodes' GPUs: whole nodes are paid for
    price_per_node_hour: float
    training_minutes: float  # the run's, or a day's
    run_known: bool  # from the model's tokens; else per day of running
    every_minutes: int
    size_gib: float | None  # None: unknown
    size_from: str | None  # "sizeGiB" | "model" | None
    write_mbps: float
    startup_minutes: float  # the first start
    replacement_minutes: float  # a replacement node's first step
    failures_per_node_day: float

    @property
    def write_minutes(self) -> float | None:
        return None if self.size_gib is None else self.size_gib * GIB / (self.write_mbps * MB) / 60

    @property
    def restart_minutes(self) -> float:
        """A replacement node's first step, then reading the checkpoint back (when its size is known)."""
        return self.replacement_minutes + (self.write_minutes or 0.0)

    @property
    def failures(self) -> float:
        return self.failures_per_node_day * self.nodes * self.training_minutes / DAY_MINUTES

    @property
    def mtbf_minutes(self) -> float | None:
        rate = self.failures_per_node_day * self.nodes
        return DAY_MINUTES / rate if rate else None

    def parts(self, every: float) -> dict[str, float]:
        """Minutes of the run (or day) that do not train, at a checkpoint every `every` minutes."""
        return {"checkpointing": self.training_minutes * (self.write_minutes or 0.0) / every,
                "lostWork": self.failures * every / 2, "firstStart": self.startup_minutes,
                "restarts": self.failures * self.restart_minutes}

    def goodput(self, every: float) -> float:
        return self.training_minutes / (self.training_minutes + sum(self.parts(every).values()))

    @property
    def best_minutes(self) -> int | None:
        """sqrt(2 x write x MTBF) in whole minutes within everyMinutes' range; None with no size or no failures."""
        write, mtbf = self.write_minutes, self.mtbf_minutes
        if write is None or mtbf is None:
            return None
        low, high = EVERY_MINUTES_RANGE
        exact = math.sqrt(2 * write * mtbf)
        # The model's goodput is unimodal in the interval: the better of the two whole minutes around it.
        candidates = {min(max(m, low), high) for m in (math.floor(exact), math.ceil(exact))}
        return max(sorted(candidates), key=self.goodput)

    def _usd(self, minutes: float) -> float:
        return minutes / 60 * self.nodes * self.price_per_node_hour

    def _gain(self, best: int) -> tuple[float, float | None]:
        """USD a day of running, and over the run when it is known, that the best interval saves."""
        per_day = (self.goodput(best) - self.goodput(self.every_minutes)) * self._usd(DAY_MINUTES)
        saved = sum(self.parts(self.every_minutes).values()) - sum(self.parts(best).values())
        return per_day, self._usd(saved) if self.run_known else None

    def warnings(self) -> list[str]:
        out, write, best = [], self.write_minutes, self.best_minutes
        if write is not None and write > self.every_minutes:
            out.append(f"job {self.name}: a checkpoint ({self.size_gib:,.1f} GiB) takes {_span(write)} to write at "
                       f"the file system's {self.write_mbps:,.0f} MB/s, longer than its interval "
                       f"(checkpoint.everyMinutes {self.every_minutes}): raise the interval or the FSx throughput "
                       "(storage.fsx storageCapacityGiB, throughputPerTiB)")
        if best is not None and (points := 100 * (self.goodput(best) - self.goodput(self.every_minutes))) > WARN_POINTS:
            per_day, over_run = self._gain(best)
            cost = f"${over_run:,.0f} over the run" if over_run is not None else f"${per_day:,.0f} a day"
            out.append(f"job {self.name}: checkpoints every {self.every_minutes} min cost {points:.1f} points of "
                       f"goodput against every {best} min ({cost}): set checkpoint.everyMinutes: {best}")
        return out

    def to_dict(self) -> dict[str, Any]:
        every, write, best, mtbf = self.every_minutes, self.write_minutes, self.best_minutes, self.mtbf_minutes
        parts = self.parts(every)
        idle = sum(parts.values())
        share = 1 - self.goodput(every)
        optimum = None
        if best is not None:
            per_day, over_run = self._gain(best)
            optimum = {"everyMinutes": best, "exactMinutes": round(math.sqrt(2 * write * mtbf), 1),
                       "goodput": round(self.goodput(best), 4),
                       "points": round(100 * (self.goodput(best) - self.goodput(every)), 2),
                       "usdPerDay": round(per_day, 2), "usdOverRun": None if over_run is None else round(over_run, 2)}
        return {
            "name": self.name, "pool": self.pool, "nodes": self.nodes, "gpus": self.gpus,
            "pricePerNodeHour": self.price_per_node_hour, "trainingHours": round(self.training_minutes / 60, 2),
            "runFrom": "model" if self.run_known else "perDay",
            "checkpoint": {"everyMinutes": every, "sizeGiB": None if self.size_gib is None else round(self.size_gib, 1),
                           "sizeFrom": self.size_from, "writeMBps": round(self.write_mbps, 1),
                           "writeMinutes": None if write is None else round(write, 2), "blocking": True},
            "startupMinutes": self.startup_minutes, "restartMinutes": round(self.restart_minutes, 2),
            "expectedFailures": round(self.failures, 4),
            "mtbfHours": None if mtbf is None else round(mtbf / 60, 1),
            "minutes": {"training": round(self.training_minutes, 1), **{k: round(v, 3) for k, v in parts.items()}},
            "goodput": round(self.goodput(every), 4), "upperBound": write is None,
            "lost": {"gpuHoursPerDay": round(share * 24 * self.gpus, 1),
                     "usdPerDay": round(share * self._usd(DAY_MINUTES), 2),
                     "gpuHoursOverRun": round(idle / 60 * self.gpus, 1) if self.run_known else None,
                     "usdOverRun": round(self._usd(idle), 2) if self.run_known else None},
            "optimum": optimum, "warnings": self.warnings(),
        }


def first_step(cfg: StackConfig, job: JobConfig, nodes: int) -> startup.TimeToFirstStep:
    """`nodes` of the job pulling its image at once from zero (through the cache for a public ECR image)."""
    cached = cfg.image_cache and job.image.startswith(f"{images.PUBLIC_ECR}/")
    return startup.time_to_first_step(nodes, gpu=True, through_cache=cached)


def checkpoint_size(job: JobConfig) -> tuple[float | None, str | None]:
    """GiB and where it came from: checkpoint.sizeGiB, else the model's parameters x 14 bytes, else unknown."""
    if job.checkpoint.size_gib is not None:
        return job.checkpoint.size_gib, "sizeGiB"
    if job.model is not None:
        return job.model.params * CHECKPOINT_BYTES_PER_PARAM / GIB, "model"
    return None, None


def job_goodput(cfg: StackConfig, job: JobConfig) -> JobGoodput:
    pool = cfg.pool(job.pool)
    days = jobsizing.size_job(job, pool, cfg.prices).training_days if job.model is not None else None
    size, size_from = checkpoint_size(job)
    pulling = job.nodes + (job.ps_replicas if job.launcher == "ps" else 0)
    return JobGoodput(job.name, job.pool, job.nodes, job.nodes * pool.instance.gpu_count,
                      cfg.price(pool.instance_type), DAY_MINUTES * (days if days is not None else 1), days is not None,
                      job.checkpoint.every_minutes, size, size_from, cfg.storage.fsx.aggregate_throughput_mbps,
                      first_step(cfg, job, pulling).total_minutes, first_step(cfg, job, 1).total_minutes,
                      cfg.observability.goodput.node_failures_per_day)


def plan(cfg: StackConfig) -> dict[str, Any]:
    """The plan's `goodput` section: the assumptions, each job's model and the warnings."""
    jobs = [job_goodput(cfg, job).to_dict() for job in cfg.jobs]
    rate = cfg.observability.goodput.node_failures_per_day
    return {"nodeFailuresPerDay": rate, "failuresSource": LLAMA3 if rate == NODE_FAILURES_PER_DAY_DEFAULT else None,
            "fsxDeploymentType": cfg.storage.fsx.deployment_type,
            "fsxWriteMBps": round(cfg.storage.fsx.aggregate_throughput_mbps, 1),
            "checkpointBytesPerParam": CHECKPOINT_BYTES_PER_PARAM, "warnPoints": WARN_POINTS, "jobs": jobs,
            "warnings": [w for j in jobs for w in j["warnings"]]}


# -- text ------------------------------------------------------------------------------------------------


def _span(minutes: float) -> str:
    if minutes < 1:
        return f"{minutes * 60:.0f} s"
    if minutes < 120:
        return f"{minutes:.1f} min"
    return f"{minutes / 60:.1f} h" if minutes < 2 * DAY_MINUTES else f"{minutes / DAY_MINUTES:.1f} days"


def _job_lines(j: dict[str, Any]) -> list[str]:
    c, m, lost, best = j["checkpoint"], j["minutes"], j["lost"], j["optimum"]
    nodes = f"{j['nodes']} node{'' if j['nodes'] == 1 else 's'}"
    bound = "at most " if j["upperBound"] else ""
    if j["runFrom"] == "model":
        head = (f"goodput {bound}{100 * j['goodput']:.1f}% over its run of {_span(m['training'])} on {nodes} (its "
                f"model's tokens); {lost['gpuHoursOverRun']:,.0f} GPU-hours (${lost['usdOverRun']:,.0f}, "
                f"${lost['usdPerDay']:,.0f} a day) not training")
    else:
        head = (f"goodput {bound}{100 * j['goodput']:.1f}% per day of running on {nodes} (no model tokens: no run "
                f"time); {lost['gpuHoursPerDay']:,.1f} GPU-hours (${lost['usdPerDay']:,.2f}) a day not training")
    ckpt = (f"checkpoints {_span(m['checkpointing'])} ({c['sizeGiB']:,.1f} GiB"
            + (" = params x 14 B" if c["sizeFrom"] == "model" else "")
            + f", {_span(c['writeMinutes'])} each, every {c['everyMinutes']} min)" if c["sizeGiB"] is not None else
            f"checkpoints every {c['everyMinutes']} min of unknown size (set checkpoint.sizeGiB, or model)")
    failures = ("no failures assumed" if j["mtbfHours"] is None else
                f"{j['expectedFailures']:.3g} failures (MTBF {_span(j['mtbfHours'] * 60)}) losing "
                f"{_span(m['lostWork'])} of work and {_span(m['restarts'])} restarting ({_span(j['restartMinutes'])} "
                "each)")
    out = [f"  {j['name']}: {head}: {ckpt}, {failures}, first start {_span(m['firstStart'])}"]
    if best is not None:
        gain = (f"${best['usdOverRun']:,.0f} less over the run" if best["usdOverRun"] is not None
                else f"${best['usdPerDay']:,.2f} less a day")
        same = best["everyMinutes"] == c["everyMinutes"]
        out.append(f"    best interval ~{best['everyMinutes']} min (sqrt(2 x {_span(c['writeMinutes'])} x "
                   f"{_span(j['mtbfHours'] * 60)}) = {best['exactMinutes']:g} min"
                   + (", within everyMinutes' 1-1440" if abs(best["exactMinutes"] - best["everyMinutes"]) > 1 else "")
                   + "): "
                   + ("its own" if same else f"goodput {100 * best['goodput']:.1f}%, +{best['points']:.1f} points, "
                                             f"{gain}"))
    return out


def render(section: dict[str, Any] | None) -> list[str]:
    """The section's lines (a blank line first), from the report's `goodput`; nothing without a job."""
    if not section or not section["jobs"]:
        return []
    rate, source = section["nodeFailuresPerDay"], section["failuresSource"]
    out = ["", "Goodput (expected: the share of each job's paid GPU time that trains; README, Goodput)",
           f"  assumes {rate:g} unexpected failures per node-day (observability.goodput.nodeFailuresPerDay"
           + (f"; {source})" if source else ", the stack's)") + ", each losing half a checkpoint interval of work "
           "and a restart (a replacement node's first step, then reading the checkpoint back); checkpoints written "
           f"at the file system's {section['fsxWriteMBps']:,.0f} MB/s ({section['fsxDeploymentType']}) while the job "
           "waits (an asynchronous checkpoint hides most of that); best interval sqrt(2 x write time x MTBF) (Young "
           "1974, Daly 2006)"]
    for j in section["jobs"]:
        out += _job_lines(j)
    out += [f"  WARNING: {w}" for w in section["warnings"]]
    return out
