"""The program's resource hooks: what runs against AWS before Pulumi deletes something that holds data (and
before it updates a node group: its bounds).

- `export_to_s3` (before a data repository association is deleted): export
  the file system to S3 and wait for it; a failed or timed-out export fails
  the delete, so the link, the file system and its data stay.
- `wait_for_fsx_tasks` (before the file system is deleted): DeleteFileSystem
  fails while a data repository task is pending or running.
- `keep_bucket_data` (before a bucket the stack may delete is deleted): no
  object goes without a confirmation naming the bucket.
- `release_leaked_enis` (before a private subnet is deleted): interfaces
  the VPC CNI left would block it.
- `release_metrics_volumes` (before the EKS cluster is deleted, after its
  nodes): Prometheus's EBS volume, if the CSI driver left it, would bill on.
- `delete_cached_images` (before the ECR pull-through cache rule is
  deleted): the repositories it created would stay and bill for storage.
  Node groups are deleted in parallel, so a pull may re-create one:
- `sweep_cached_images` (before the EKS cluster is deleted, after every
  node group, which all depend on it): the cache's repositories again, now
  that no node is left to pull; `bootstrap destroy` sweeps once more after
  the destroy (bootstrap.deployed.teardown).
- `apply_node_group_scaling` (before a pool's node group is updated, and
  after one is created, a replacement included): the pool's minNodes and
  maxNodes, set on the group with desiredSize moved only into them
  (node_scaling: the provider would send a stale desiredSize, and create a
  replacement with the first bounds it was given).
- `tag_running_instances` (after an instance tag of a node group's Auto
  Scaling group is created or changed): the tag on the instances the group
  already runs (instance_tags: the group propagates it to new ones only).

Pulumi runs before-delete hooks only when the program runs with the
operation, so plain `pulumi destroy` refuses and asks for `--run-program`;
`python -m bootstrap destroy` runs it. Every hook is registered on every run,
bound or not: the engine finds the hooks of a resource deleted because it
left the program by the names in the state. The AWS work runs in a thread
(hooks are called on the program's event loop) as the stack's own identity.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi

from components.core import images, node_updates
from components.core.config import StackConfig
from components.hooks import (
    bucket_guard,
    fsx_export,
    image_cache,
    instance_tags,
    leaked_enis,
    metrics_volumes,
    node_scaling,
)
from components.hooks.session import aws_session

EXPORT_HOOK = "gpucluster-export-fsx-to-s3"
FSX_TASKS_HOOK = "gpucluster-wait-for-fsx-tasks"
BUCKET_HOOK = "gpucluster-keep-bucket-data"
ENI_HOOK = "gpucluster-release-leaked-enis"
VOLUMES_HOOK = "gpucluster-release-metrics-volumes"
IMAGES_HOOK = "gpucluster-delete-cached-images"
SWEEP_IMAGES_HOOK = "gpucluster-sweep-cached-images"
SCALING_HOOK = "gpucluster-apply-node-group-scaling"
INSTANCE_TAGS_HOOK = "gpucluster-tag-running-instances"
# `python -m bootstrap destroy --skip-export` sets it: delete the file system unexported.
SKIP_EXPORT_ENV = "GPUCLUSTER_SKIP_FSX_EXPORT"
# A file system can only be deleted once its tasks end; give a running one (ours ended already) this long.
FSX_TASKS_TIMEOUT_SECONDS = 30 * 60


@dataclass(frozen=True)
class HookSettings:
    stack: str
    cluster_name: str
    region: str
    profile: str | None
    role_arn: str | None
    export_timeout_minutes: int
    adopted_bucket: str | None
    image_cache_prefix: str | None = None  # the pull-through cache's, when gpucluster:imageCache is on

    @classmethod
    def of(cls, cfg: StackConfig) -> HookSettings:
        return cls(stack=cfg.stack, cluster_name=cfg.cluster_name, region=cfg.region, profile=cfg.aws_profile,
                   role_arn=cfg.aws_role_arn, export_timeout_minutes=cfg.storage.export_timeout_minutes,
                   adopted_bucket=cfg.storage.bucket_name,
                   image_cache_prefix=images.cache_prefix(cfg.cluster_name) if cfg.image_cache else None)


def _value(mapping: Any, *path: str) -> Any:
    """mapping[path...] across the engine's camelCase and the SDK's snake_case keys, else None."""
    for key in path:
        if not isinstance(mapping, dict):
            return None
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        mapping = mapping.get(key, mapping.get(snake))
    return mapping


class HookWork:
    """What each hook does against AWS, as the stack's identity; callable without Pulumi (tests, tools)."""

    def __init__(self, settings: HookSettings, session: Callable[[], Any] | None = None,
                 log: Callable[[str], None] = pulumi.log.info):
        self.settings = settings
        self._session = session or (lambda: aws_session(settings.region, settings.profile, settings.role_arn))
        self._log = log

    def export_now(self, args: pulumi.ResourceHookArgs) -> None:
        if os.environ.get(SKIP_EXPORT_ENV) == "1":
            self._log(f"{args.id}: not exported to S3 ({SKIP_EXPORT_ENV}=1)")
            return
        events = _value(args.old_inputs, "s3", "autoExportPolicy", "events") or []
        result = fsx_export.export_before_unlink(
            self._session().client("fsx"), args.id, self.settings.export_timeout_minutes * 60, list(events),
            log=self._log)
        self._log(f"{args.id}: {result.note}")

    def wait_for_tasks_now(self, args: pulumi.ResourceHookArgs) -> None:
        fsx_export.wait_for_tasks(self._session().client("fsx"), args.id, FSX_TASKS_TIMEOUT_SECONDS, log=self._log)

    def check_bucket_now(self, args: pulumi.ResourceHookArgs) -> None:
        bucket = _value(args.old_outputs, "bucket") or args.id
        self._log(bucket_guard.check_deletable(self._session().client("s3"), bucket, self.settings.stack,
                                               self.settings.adopted_bucket))

    def release_enis_now(self, args: pulumi.ResourceHookArgs) -> None:
        leaked_enis.release_leaked_enis(self._session().client("ec2"), args.id, self.settings.cluster_name,
                                        log=self._log)

    def release_volumes_now(self, args: pulumi.ResourceHookArgs) -> None:
        metrics_volumes.release_metrics_volumes(self._session().client("ec2"), self.settings.cluster_name,
                                                log=self._log)

    def delete_images_now(self, args: pulumi.ResourceHookArgs) -> None:
        prefix = _value(args.old_inputs, "ecrRepositoryPrefix") or args.id
        image_cache.delete_cached_images(self._session().client("ecr"), prefix, log=self._log)

    def sweep_images_now(self, args: pulumi.ResourceHookArgs) -> None:
        if self.settings.image_cache_prefix is not None:
            image_cache.delete_cached_images(self._session().client("ecr"), self.settings.image_cache_prefix,
                                             log=self._log)

    def apply_scaling_now(self, args: pulumi.ResourceHookArgs) -> None:
        # The bounds from the new scaling tag (scalingConfig itself is ignored, so new_inputs holds the
        # old one); the names from the old outputs, else the id "<cluster>:<node group>".
        # After a create (a replacement among them) the new group's outputs name it.
        tag = (_value(args.new_inputs, "tags") or {}).get(node_updates.SCALING_TAG)
        min_size, max_size = node_updates.parse_scaling_tag(tag)
        cluster, _, nodegroup = str(args.id).partition(":")
        outputs = args.new_outputs if args.old_outputs is None else args.old_outputs
        node_scaling.apply_scaling(self._session().client("eks"),
                                   _value(outputs, "clusterName") or cluster,
                                   _value(outputs, "nodeGroupName") or nodegroup,
                                   min_size, max_size, log=self._log)

    def tag_instances_now(self, args: pulumi.ResourceHookArgs) -> None:
        tag = _value(args.new_inputs, "tag") or {}
        session = self._session()
        instance_tags.tag_running_instances(session.client("autoscaling"), session.client("ec2"),
                                            _value(args.new_inputs, "autoScalingGroupName"), tag["key"],
                                            tag["value"], log=self._log)


class StackHooks:
    """The named hooks of one program run, registered with the engine, for components to bind."""

    def __init__(self, settings: HookSettings, work: HookWork | None = None):
        self.work = work or HookWork(settings)
        self.export_to_s3 = pulumi.ResourceHook(EXPORT_HOOK, _in_thread(self.work.export_now))
        self.wait_for_fsx_tasks = pulumi.ResourceHook(FSX_TASKS_HOOK, _in_thread(self.work.wait_for_tasks_now))
        self.keep_bucket_data = pulumi.ResourceHook(BUCKET_HOOK, _in_thread(self.work.check_bucket_now))
        self.release_leaked_enis = pulumi.ResourceHook(ENI_HOOK, _in_thread(self.work.release_enis_now))
        self.release_metrics_volumes = pulumi.ResourceHook(VOLUMES_HOOK, _in_thread(self.work.release_volumes_now))
        self.delete_cached_images = pulumi.ResourceHook(IMAGES_HOOK, _in_thread(self.work.delete_images_now))
        self.sweep_cached_images = pulumi.ResourceHook(SWEEP_IMAGES_HOOK, _in_thread(self.work.sweep_images_now))
        self.apply_node_group_scaling = pulumi.ResourceHook(SCALING_HOOK, _in_thread(self.work.apply_scaling_now))
        self.tag_running_instances = pulumi.ResourceHook(INSTANCE_TAGS_HOOK, _in_thread(self.work.tag_instances_now))

    @staticmethod
    def before_delete(*hooks: pulumi.ResourceHook) -> pulumi.ResourceHookBinding:
        return pulumi.ResourceHookBinding(before_delete=list(hooks))

    @staticmethod
    def before_update(*hooks: pulumi.ResourceHook) -> pulumi.ResourceHookBinding:
        return pulumi.ResourceHookBinding(before_update=list(hooks))

    @staticmethod
    def before_update_after_create(*hooks: pulumi.ResourceHook) -> pulumi.ResourceHookBinding:
        # A replacement runs create hooks, not update hooks (Pulumi docs, "Resource hooks").
        return pulumi.ResourceHookBinding(before_update=list(hooks), after_create=list(hooks))

    @staticmethod
    def after_create_or_update(*hooks: pulumi.ResourceHook) -> pulumi.ResourceHookBinding:
        return pulumi.ResourceHookBinding(after_create=list(hooks), after_update=list(hooks))


def _in_thread(work: Callable[[pulumi.ResourceHookArgs], None]) -> Callable[[pulumi.ResourceHookArgs], Any]:
    """An async hook running `work` on a worker thread: an hour-long export must not block the event loop."""

    async def hook(args: pulumi.ResourceHookArgs) -> None:
        await asyncio.to_thread(work, args)

    hook.__name__ = work.__name__
    hook.__doc__ = work.__doc__
    return hook
