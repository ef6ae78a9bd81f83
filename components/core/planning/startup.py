"""Time from "queued on zero nodes" to a job's first step, modelled stage by stage (pure).

Every figure is an estimate with its source; the plan prints them so a user
can see which stage dominates (usually the image):

- autoscaler: it looks for unschedulable pods every 10 s (--scan-interval)
  and asks for nodes within 30 s on clusters under 100 nodes, 5 s on
  average (kubernetes/autoscaler cluster-autoscaler/FAQ.md at 1.35.2, "What
  are the Service Level Objectives"): 0.5 min.
- launch and boot to Ready: 40-80 s from launch to node registration for
  general-purpose types (awslabs/amazon-eks-ami #1099; aws/karpenter-provider-
  aws #6128), and "GPU instance types often take much longer to boot" (the
  same #1099 comment), with no AWS figure for them: 1.5 min for CPU types,
  4 min for GPU types (our estimate: driver, EFA and NVMe set-up at boot).
- device plugins: the NVIDIA and EFA plugins start and advertise their
  resources before a worker can be bound (cluster-autoscaler AWS README:
  the device plugin "can take some time"): 1 min, our estimate.
- image: the AWS Deep Learning Containers are 15-20 GB and a plain pull
  takes 4-6 minutes per instance (AWS Machine Learning Blog, "Reducing
  container cold start times using SOCI index on DLAMI and DLC", 2026):
  ~60 MB/s a node, the middle of that range, for a 15 GB image. Without the
  pull-through cache every node's pull shares the NAT gateway, 5 Gbps at
  first, scaling to 100 Gbps (VPC User Guide, "NAT gateway basics"): the
  modelled rate is the smaller of 60 MB/s and 625 MB/s over the nodes.
  Through the cache, layers come from S3 through the gateway endpoint.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

AUTOSCALER_MINUTES = 0.5
BOOT_MINUTES_GPU = 4.0
BOOT_MINUTES_CPU = 1.5
PLUGINS_MINUTES = 1.0
IMAGE_GB = 15.0  # an AWS Deep Learning Container; the plan says it assumes it
NODE_PULL_MBPS = 60.0  # MB/s per node
NAT_START_MBPS = 5e9 / 8 / 1e6  # 625 MB/s: a NAT gateway's 5 Gbps before it scales


@dataclass(frozen=True)
class TimeToFirstStep:
    autoscaler_minutes: float
    boot_minutes: float
    plugins_minutes: float
    image_gb: float
    pull_mbps: float  # per node, as modelled
    image_minutes: float
    through_cache: bool
    total_minutes: float

    def to_dict(self) -> dict:
        return asdict(self)


def time_to_first_step(nodes: int, gpu: bool, through_cache: bool, image_gb: float = IMAGE_GB) -> TimeToFirstStep:
    """`nodes` pulling the image at once (workers, and parameter servers on their own nodes)."""
    rate = NODE_PULL_MBPS if through_cache else min(NODE_PULL_MBPS, NAT_START_MBPS / max(nodes, 1))
    image = image_gb * 1000 / rate / 60
    boot = BOOT_MINUTES_GPU if gpu else BOOT_MINUTES_CPU
    plugins = PLUGINS_MINUTES if gpu else 0.0
    total = AUTOSCALER_MINUTES + boot + plugins + image
    return TimeToFirstStep(AUTOSCALER_MINUTES, boot, plugins, image_gb, round(rate, 1), round(image, 1),
                           through_cache, round(total, 1))


def render(t: TimeToFirstStep) -> str:
    source = "through the pull-through cache" if t.through_cache else "through the NAT gateway"
    return (f"first step ~{t.total_minutes:g} min from zero nodes: autoscaler {t.autoscaler_minutes:g}, launch and "
            f"boot {t.boot_minutes:g}, device plugins {t.plugins_minutes:g}, image {t.image_minutes:g} "
            f"({t.image_gb:g} GB assumed, {t.pull_mbps:g} MB/s a node {source})")
