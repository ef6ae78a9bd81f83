"""TrainingJob and FabricTest: a job's MPIJob/TrainJob/JobSet (with its scripts and secret env), and a pool's
nccl-tests run. A `startOnUp: false` job gets its ConfigMap and Secret only: `bootstrap submit` starts it.

Thin wiring of the manifests components/core/launcher.py builds; each
registers one custom resource, queued in Kueue. Pulumi does not wait for a
custom resource to finish, so `pulumi up` returns once the job is accepted
(and queued). A changed spec replaces the job (delete, then create): the
operators do not reconcile spec edits into running pods, TrainJob's
trainer block is immutable, and the fixed name forbids creating the new
one first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.core.config import CpuPoolConfig, GpuPoolConfig, JobConfig, StorageConfig
from components.core.config.jobs import script_files
from components.core.hardware import nccl
from components.core.kube import launcher, workers
from components.kubernetes.objects import KubernetesObject


def _job_options(component: pulumi.Resource, provider: k8s.Provider,
                 depends_on: Sequence[pulumi.Resource]) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=component, provider=provider, depends_on=list(depends_on),
                                  replace_on_changes=["spec"], delete_before_replace=True)


@dataclass(frozen=True)
class TrainingJobArgs:
    job: JobConfig
    pool: GpuPoolConfig
    namespace: str
    claim_name: pulumi.Input[str]  # the FSx ReadWriteMany claim in `namespace`
    provider: k8s.Provider
    storage: StorageConfig | None = None  # where datasets and checkpoints are under the mount
    prices: dict[str, float] | None = None  # for maxCostUsd
    # The Operators component (CRDs, operators, runtimes ready), the Queue and the claim's owner.
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # env values set with `pulumi config set --secret --path`: a Secret the job's env refers to.
    secret_env: dict[str, str] = field(default_factory=dict)
    ps_pool: CpuPoolConfig | None = None  # launcher ps: the CPU pool of its parameter servers
    image_cache: str | None = None  # ImageCache.base: a public ECR image is pulled through it


class TrainingJob(pulumi.ComponentResource):
    """One training job as an MPIJob (launcher mpirun), TrainJob (torchrun) or JobSet (ps), queued."""

    job_name: str
    kind: str
    resource: KubernetesObject | None  # None for a startOnUp: false job: `bootstrap submit` starts it

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:TrainingJob", name, None, opts)
        job, pool = args.job, args.pool
        api_version, self.kind = launcher.KINDS[job.launcher]
        self.job_name = job.name
        secret = frozenset(args.secret_env)
        depends_on = list(args.depends_on)
        if job.scripts:
            depends_on.append(k8s.core.v1.ConfigMap(
                f"{name}-scripts", metadata={"name": workers.scripts_config_map_name(job.name),
                                             "namespace": args.namespace, "labels": workers.labels(job.name, pool)},
                data=script_files(job.scripts),
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.depends_on))))
        if secret:
            depends_on.append(k8s.core.v1.Secret(
                f"{name}-env", metadata={"name": workers.secret_env_name(job.name), "namespace": args.namespace,
                                         "labels": workers.labels(job.name, pool)},
                type="Opaque", string_data=pulumi.Output.secret(dict(args.secret_env)),
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.depends_on))))
        self.resource = None
        if job.start_on_up:
            manifest = pulumi.Output.from_input(args.claim_name).apply(
                lambda claim: launcher.job_manifest(job, pool, launcher.JobContext(
                    args.namespace, claim, args.storage, args.prices,
                    (args.ps_pool,) if args.ps_pool is not None else (), args.image_cache), secret))
            self.resource = KubernetesObject(
                f"{name}-{self.kind.lower()}",
                {"apiVersion": api_version, "kind": self.kind, "metadata": manifest["metadata"],
                 "spec": manifest["spec"]},
                _job_options(self, args.provider, depends_on))
        self.register_outputs({"jobName": self.job_name, "kind": self.kind, "namespace": args.namespace,
                               "startOnUp": job.start_on_up})


@dataclass(frozen=True)
class FabricTestArgs:
    pool: GpuPoolConfig  # fabricTest: true (config checks it has EFA and maxNodes >= 2)
    namespace: str
    provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)  # the Operators and the Queue
    image_cache: str | None = None  # ImageCache.base


class FabricTest(pulumi.ComponentResource):
    """nccl-tests all_reduce_perf across `nodes` nodes of a pool, and the bus bandwidth to expect.

    `expected_busbw_gbps` is None for types without EFA; compare the run's
    log with `python -m bootstrap nccl-report`.
    """

    job_name: str
    kind: str
    expected_busbw_gbps: float | None
    expected_busbw_size: str | None
    resource: KubernetesObject

    def __init__(self, name: str, args: FabricTestArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:FabricTest", name, None, opts)
        pool = args.pool
        manifest = launcher.nccl_test_mpijob(pool, args.namespace, image_cache=args.image_cache)
        self.job_name = manifest["metadata"]["name"]
        self.kind = manifest["kind"]
        expected = nccl.expected_busbw_gbps(pool.instance_type)
        self.expected_busbw_gbps, self.expected_busbw_size = expected if expected else (None, None)
        self.resource = KubernetesObject(f"{name}-mpijob", manifest, _job_options(self, args.provider, args.depends_on))
        self.register_outputs({
            "jobName": self.job_name,
            "kind": self.kind,
            "expectedBusbwGbps": self.expected_busbw_gbps,
            "expectedBusbwSize": self.expected_busbw_size,
        })
