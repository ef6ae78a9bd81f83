"""Instance catalog: the hardware facts every other module sizes from.

Pure data, no Pulumi. Facts that AWS publishes (GPUs, vCPU, memory, network
cards, EFA interfaces, bandwidth, instance store) are copied from EC2
DescribeInstanceTypes and checked against the copy of that data shipped in
moto by tests/test_catalog.py. Peak BF16 throughput comes from NVIDIA's
datasheets; prices from the AWS on-demand price list, with source and date on
each entry, and a stack may override them (`gpucluster:prices`).
"""

from __future__ import annotations

from dataclasses import dataclass

# Dense (no sparsity) BF16 tensor-core peak per GPU, TFLOP/s, from NVIDIA's
# datasheets: A100 https://www.nvidia.com/en-us/data-center/a100/ (312),
# H100 SXM and H200 https://www.nvidia.com/en-us/data-center/h100/ , /h200/
# (989), HGX B200/B300 https://www.nvidia.com/en-us/data-center/hgx/ (18
# PFLOP/s dense per 8 GPUs), L40S https://www.nvidia.com/en-us/data-center/l40s/
# (362, 733 with sparsity), L4 https://www.nvidia.com/en-us/data-center/l4/
# (121), A10 https://www.nvidia.com/en-us/data-center/products/a10-gpu/ (125;
# the A10G in g5 is AWS's variant of it).
PEAK_BF16_TFLOPS = {
    "A100": 312.0,
    "H100": 989.0,
    "H200": 989.0,
    "B200": 2250.0,
    "B300": 2250.0,
    "L40S": 362.0,
    "A10G": 125.0,
    "L4": 121.0,
}

# On-demand Linux USD/hour in us-east-1, from the AWS Price List
# (https://aws.amazon.com/ec2/pricing/on-demand/, AmazonEC2 offer file,
# snapshot of 2026-09-24; P4/P5 after the June 2025 reduction announced at
# https://aws.amazon.com/blogs/aws/announcing-up-to-45-price-reduction-for-amazon-ec2-nvidia-gpu-accelerated-instances/).
PRICE_SOURCE = "https://aws.amazon.com/ec2/pricing/on-demand/ (us-east-1 Linux, price list 2026-09-24)"
# p5e has no public on-demand rate in us-east-1 (Capacity Blocks only):
# p5en's rate stands in. p6-b200/p6-b300 rates are us-west-2's.
PRICE_SOURCE_P5E = "no us-east-1 on-demand rate (Capacity Blocks); p5en.48xlarge rate used as estimate"
PRICE_SOURCE_P6 = "https://aws.amazon.com/ec2/pricing/on-demand/ (us-west-2 Linux, price list 2026-09-24)"


@dataclass(frozen=True)
class InstanceType:
    """One EC2 instance type, as far as gpucluster cares."""

    name: str
    vcpus: int
    memory_gib: int
    gpu_model: str | None
    gpu_count: int
    gpu_memory_gib: float  # per GPU, GiB (DescribeInstanceTypes MiB / 1024)
    network_cards: int
    max_efa_interfaces: int  # 0: no EFA
    efa_cards: tuple[int, ...]  # network cards whose interface types include EFA
    network_gbps: float  # aggregate peak bandwidth
    local_nvme_gb: int  # instance store, GB; 0 when none
    local_nvme_disks: int  # instance-store NVMe devices
    price_usd_per_hour: float
    price_source: str
    price_date: str
    price_region: str = "us-east-1"  # the region whose list price this is

    @property
    def efa_supported(self) -> bool:
        return self.max_efa_interfaces > 0

    @property
    def is_gpu(self) -> bool:
        return self.gpu_count > 0

    @property
    def peak_bf16_tflops_per_gpu(self) -> float:
        return PEAK_BF16_TFLOPS.get(self.gpu_model or "", 0.0)

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]


def _t(name, vcpus, memory_gib, gpu_model, gpu_count, gpu_memory_gib, network_cards,
       max_efa, efa_cards, network_gbps, nvme, price, price_date,
       price_source=PRICE_SOURCE) -> InstanceType:
    price_region = "us-west-2" if price_source == PRICE_SOURCE_P6 else "us-east-1"
    disks, disk_gb = nvme
    return InstanceType(
        name=name,
        vcpus=vcpus,
        memory_gib=memory_gib,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        gpu_memory_gib=gpu_memory_gib,
        network_cards=network_cards,
        max_efa_interfaces=max_efa,
        efa_cards=tuple(efa_cards),
        network_gbps=network_gbps,
        local_nvme_gb=disks * disk_gb,
        local_nvme_disks=disks,
        price_usd_per_hour=price,
        price_source=price_source,
        price_date=price_date,
        price_region=price_region,
    )


_ALL = range
_TYPES = [
    # name, vCPU, GiB, GPU, n, GiB/GPU, cards, max EFA, EFA cards, Gbps, (NVMe disks, GB each), $/h, date
    _t("p4d.24xlarge", 96, 1152, "A100", 8, 40.0, 4, 4, _ALL(4), 400, (8, 1000), 21.96, "2026-09"),
    _t("p4de.24xlarge", 96, 1152, "A100", 8, 80.0, 4, 4, _ALL(4), 400, (8, 1000), 27.447, "2026-09"),
    _t("p5.48xlarge", 192, 2048, "H100", 8, 80.0, 32, 32, _ALL(32), 3200, (8, 3800), 55.04, "2026-09"),
    _t("p5e.48xlarge", 192, 2048, "H200", 8, 141.0, 32, 32, _ALL(32), 3200, (8, 3800), 63.296, "2026-09",
       PRICE_SOURCE_P5E),
    _t("p5en.48xlarge", 192, 2048, "H200", 8, 141.0, 16, 16, _ALL(16), 3200, (8, 3800), 63.296, "2026-09"),
    _t("p6-b200.48xlarge", 192, 2048, "B200", 8, 179.06, 8, 8, _ALL(8), 3200, (8, 3800), 113.93, "2026-09",
       PRICE_SOURCE_P6),
    # p6-b300: card 0 is ENA-only; cards 1-16 carry the 16 EFA interfaces.
    _t("p6-b300.48xlarge", 192, 4096, "B300", 8, 268.59, 17, 16, range(1, 17), 6400, (8, 3800), 142.42, "2026-09",
       PRICE_SOURCE_P6),
    _t("g6e.48xlarge", 192, 1536, "L40S", 8, 44.7, 4, 4, _ALL(4), 400, (4, 1900), 30.131, "2026-09"),
    _t("g5.48xlarge", 192, 768, "A10G", 8, 22.35, 1, 1, _ALL(1), 100, (2, 3800), 16.288, "2026-09"),
    # Cheap single-GPU types for dev stacks: no EFA, one network card.
    _t("g6e.xlarge", 4, 32, "L40S", 1, 44.7, 1, 0, (), 20, (1, 250), 1.861, "2026-09"),
    _t("g6.xlarge", 4, 16, "L4", 1, 22.35, 1, 0, (), 10, (1, 250), 0.8048, "2026-09"),
    _t("g5.xlarge", 4, 16, "A10G", 1, 22.35, 1, 0, (), 10, (1, 250), 1.006, "2026-09"),
    # System-node types (cluster add-ons, operators, autoscaler).
    _t("m7i.large", 2, 8, None, 0, 0.0, 1, 0, (), 12.5, (0, 0), 0.1008, "2026-09"),
    _t("m7i.xlarge", 4, 16, None, 0, 0.0, 1, 0, (), 12.5, (0, 0), 0.2016, "2026-09"),
    _t("m7i.2xlarge", 8, 32, None, 0, 0.0, 1, 0, (), 12.5, (0, 0), 0.4032, "2026-09"),
    # CPU pools (gpucluster:cpuPools: parameter servers, data preparation): more memory and network per node.
    _t("m7i.4xlarge", 16, 64, None, 0, 0.0, 1, 0, (), 12.5, (0, 0), 0.8064, "2026-09"),
    _t("m7i.8xlarge", 32, 128, None, 0, 0.0, 1, 0, (), 12.5, (0, 0), 1.6128, "2026-09"),
    _t("m7i.16xlarge", 64, 256, None, 0, 0.0, 1, 0, (), 25, (0, 0), 3.2256, "2026-09"),
    _t("r7i.2xlarge", 8, 64, None, 0, 0.0, 1, 0, (), 12.5, (0, 0), 0.5292, "2026-09"),
    _t("r7i.4xlarge", 16, 128, None, 0, 0.0, 1, 0, (), 12.5, (0, 0), 1.0584, "2026-09"),
    _t("r7i.8xlarge", 32, 256, None, 0, 0.0, 1, 0, (), 12.5, (0, 0), 2.1168, "2026-09"),
    _t("r7i.16xlarge", 64, 512, None, 0, 0.0, 1, 0, (), 25, (0, 0), 4.2336, "2026-09"),
]

CATALOG: dict[str, InstanceType] = {t.name: t for t in _TYPES}
GPU_TYPES = tuple(t.name for t in _TYPES if t.is_gpu)
# The system node group's choices, and every CPU type a CPU pool may use.
SYSTEM_TYPES = ("m7i.large", "m7i.xlarge", "m7i.2xlarge")
CPU_TYPES = tuple(t.name for t in _TYPES if not t.is_gpu)


def get(name: str) -> InstanceType:
    """The catalog entry for `name`; KeyError names what exists."""
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(f"{name!r} is not in the catalog; known: {', '.join(CATALOG)}") from None


def price(name: str, overrides: dict[str, float] | None = None) -> float:
    """On-demand USD/hour, the stack's override first."""
    if overrides and name in overrides:
        return overrides[name]
    return get(name).price_usd_per_hour
