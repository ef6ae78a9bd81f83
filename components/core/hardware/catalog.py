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
# The CPU-pool families c7i, c6i, m6i, r6i, m7a, c7a: the same page and basis (us-east-1, Linux, shared
# tenancy, on-demand); the rates as the AWS Price List API returned them on 2026-07-20, copied by AWS's
# Karpenter into aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go
# (InitialOnDemandPricesAWS["us-east-1"], commit 6fc13b5, "Update data from AWS APIs" #9435), which also
# carries this catalog's m7i/r7i rates unchanged.
PRICE_SOURCE_CPU = ("https://aws.amazon.com/ec2/pricing/on-demand/ (us-east-1 Linux, AWS Price List API "
                    "2026-07-20 as in aws/karpenter-provider-aws zz_generated.pricing_aws.go)")


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
    # Peak bandwidth of network card 0, the card of the primary ENA interface: all the TCP/IP a node has,
    # since every other card carries an efa-only interface without an IP address (efa.py).
    card0_gbps: float = 0.0

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
       price_source=PRICE_SOURCE, card0=None) -> InstanceType:
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
        # One card: card 0 is the whole network (DescribeInstanceTypes NetworkCards[0].PeakBandwidthInGbps).
        card0_gbps=network_gbps if card0 is None else card0,
    )


def _cpu(name: str, vcpus: int, memory_gib: int, network_gbps: float, price: float) -> InstanceType:
    """A CPU-pool type: one network card, no EFA, no instance store, priced in us-east-1 (PRICE_SOURCE_CPU)."""
    return _t(name, vcpus, memory_gib, None, 0, 0.0, 1, 0, (), network_gbps, (0, 0), price, "2026-07",
              PRICE_SOURCE_CPU)


# The families people pick for parameter servers and data loading, 2xlarge to 24xlarge (the larger
# 32xlarge/48xlarge sizes add EFA, which CPU pools do not use). vCPU, GiB and Gbps are DescribeInstanceTypes'
# (NetworkPerformance: 2xlarge/4xlarge "Up to 12.5 Gigabit", then 12.5, 18.75, 25, 37.5), checked against moto's
# copy by tests/test_catalog.py; $/h is the us-east-1 Linux on-demand list price of PRICE_SOURCE_CPU.
_CPU_POOL_TYPES = [
    # name, vCPU, GiB, Gbps, $/h
    _cpu("c7i.2xlarge", 8, 16, 12.5, 0.357), _cpu("c7i.4xlarge", 16, 32, 12.5, 0.714),
    _cpu("c7i.8xlarge", 32, 64, 12.5, 1.428), _cpu("c7i.12xlarge", 48, 96, 18.75, 2.142),
    _cpu("c7i.16xlarge", 64, 128, 25, 2.856), _cpu("c7i.24xlarge", 96, 192, 37.5, 4.284),
    _cpu("c6i.2xlarge", 8, 16, 12.5, 0.34), _cpu("c6i.4xlarge", 16, 32, 12.5, 0.68),
    _cpu("c6i.8xlarge", 32, 64, 12.5, 1.36), _cpu("c6i.12xlarge", 48, 96, 18.75, 2.04),
    _cpu("c6i.16xlarge", 64, 128, 25, 2.72), _cpu("c6i.24xlarge", 96, 192, 37.5, 4.08),
    _cpu("m6i.2xlarge", 8, 32, 12.5, 0.384), _cpu("m6i.4xlarge", 16, 64, 12.5, 0.768),
    _cpu("m6i.8xlarge", 32, 128, 12.5, 1.536), _cpu("m6i.12xlarge", 48, 192, 18.75, 2.304),
    _cpu("m6i.16xlarge", 64, 256, 25, 3.072), _cpu("m6i.24xlarge", 96, 384, 37.5, 4.608),
    _cpu("r6i.2xlarge", 8, 64, 12.5, 0.504), _cpu("r6i.4xlarge", 16, 128, 12.5, 1.008),
    _cpu("r6i.8xlarge", 32, 256, 12.5, 2.016), _cpu("r6i.12xlarge", 48, 384, 18.75, 3.024),
    _cpu("r6i.16xlarge", 64, 512, 25, 4.032), _cpu("r6i.24xlarge", 96, 768, 37.5, 6.048),
    _cpu("m7a.2xlarge", 8, 32, 12.5, 0.46368), _cpu("m7a.4xlarge", 16, 64, 12.5, 0.92736),
    _cpu("m7a.8xlarge", 32, 128, 12.5, 1.85472), _cpu("m7a.12xlarge", 48, 192, 18.75, 2.78208),
    _cpu("m7a.16xlarge", 64, 256, 25, 3.70944), _cpu("m7a.24xlarge", 96, 384, 37.5, 5.56416),
    _cpu("c7a.2xlarge", 8, 16, 12.5, 0.41056), _cpu("c7a.4xlarge", 16, 32, 12.5, 0.82112),
    _cpu("c7a.8xlarge", 32, 64, 12.5, 1.64224), _cpu("c7a.12xlarge", 48, 96, 18.75, 2.46336),
    _cpu("c7a.16xlarge", 64, 128, 25, 3.28448), _cpu("c7a.24xlarge", 96, 192, 37.5, 4.92672),
]

_ALL = range
_TYPES = [
    # name, vCPU, GiB, GPU, n, GiB/GPU, cards, max EFA, EFA cards, Gbps, (NVMe disks, GB each), $/h, date
    _t("p4d.24xlarge", 96, 1152, "A100", 8, 40.0, 4, 4, _ALL(4), 400, (8, 1000), 21.96, "2026-09", card0=100),
    _t("p4de.24xlarge", 96, 1152, "A100", 8, 80.0, 4, 4, _ALL(4), 400, (8, 1000), 27.447, "2026-09", card0=100),
    _t("p5.48xlarge", 192, 2048, "H100", 8, 80.0, 32, 32, _ALL(32), 3200, (8, 3800), 55.04, "2026-09", card0=100),
    _t("p5e.48xlarge", 192, 2048, "H200", 8, 141.0, 32, 32, _ALL(32), 3200, (8, 3800), 63.296, "2026-09",
       PRICE_SOURCE_P5E, card0=100),
    _t("p5en.48xlarge", 192, 2048, "H200", 8, 141.0, 16, 16, _ALL(16), 3200, (8, 3800), 63.296, "2026-09", card0=200),
    _t("p6-b200.48xlarge", 192, 2048, "B200", 8, 179.06, 8, 8, _ALL(8), 3200, (8, 3800), 113.93, "2026-09",
       PRICE_SOURCE_P6, card0=200),
    # p6-b300: card 0 is ENA-only; cards 1-16 carry the 16 EFA interfaces.
    _t("p6-b300.48xlarge", 192, 4096, "B300", 8, 268.59, 17, 16, range(1, 17), 6400, (8, 3800), 142.42, "2026-09",
       PRICE_SOURCE_P6, card0=350),
    _t("g6e.48xlarge", 192, 1536, "L40S", 8, 44.7, 4, 4, _ALL(4), 400, (4, 1900), 30.131, "2026-09", card0=400),
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
    *_CPU_POOL_TYPES,
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


def by_family(names: tuple[str, ...]) -> str:
    """Types grouped by family, in catalog order: "m7i (large, xlarge), c7i (2xlarge, 4xlarge)"."""
    families: dict[str, list[str]] = {}
    for name in names:
        family, size = name.split(".", 1)
        families.setdefault(family, []).append(size)
    return ", ".join(f"{family} ({', '.join(sizes)})" for family, sizes in families.items())
