"""The catalog against AWS's describe-instance-types data as shipped in moto."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import moto
import pytest

from components.core.hardware import catalog

DATA = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
with gzip.open(DATA) as f:
    AWS = json.load(f)


def network_gbps(info: dict) -> float:
    """Aggregate bandwidth from NetworkPerformance: "3200 Gigabit", "4x 100 Gigabit", "Up to 12.5 Gigabit"."""
    text = info["NetworkPerformance"]
    m = re.fullmatch(r"(?:Up to )?(?:(\d+)x )?([\d.]+) Gigabit", text)
    assert m, text
    return float(m.group(1) or 1) * float(m.group(2))


@pytest.mark.parametrize("name", list(catalog.CATALOG))
def test_catalog_matches_describe_instance_types(name):
    t = catalog.get(name)
    aws = AWS[name]
    net = aws["NetworkInfo"]
    assert t.vcpus == aws["VCpuInfo"]["DefaultVCpus"]
    assert t.memory_gib == aws["MemoryInfo"]["SizeInMiB"] // 1024
    gpus = (aws.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        (gpu,) = gpus
        assert t.gpu_model == gpu["Name"]
        assert t.gpu_count == gpu["Count"]
        assert t.gpu_memory_gib == pytest.approx(gpu["MemoryInfo"]["SizeInMiB"] / 1024, abs=0.01)
    else:
        assert (t.gpu_model, t.gpu_count, t.gpu_memory_gib) == (None, 0, 0.0)
    assert t.network_cards == net["MaximumNetworkCards"]
    assert t.max_efa_interfaces == (net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)
    assert t.efa_supported == net["EfaSupported"]
    assert t.efa_cards == tuple(c["NetworkCardIndex"] for c in net["NetworkCards"] if "efa" in c["InterfaceTypes"])
    assert t.network_gbps == network_gbps(net)
    # The primary ENA interface's card: all the TCP/IP bandwidth a node of ours has (efa.py).
    assert t.card0_gbps == net["NetworkCards"][0]["PeakBandwidthInGbps"]
    storage = aws.get("InstanceStorageInfo") or {}
    assert t.local_nvme_gb == storage.get("TotalSizeInGB", 0)
    assert t.local_nvme_disks == sum(d["Count"] for d in storage.get("Disks", []))


def test_catalog_covers_the_supported_types():
    for name in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
                 "p6-b200.48xlarge", "p6-b300.48xlarge", "g6e.48xlarge"):
        assert catalog.get(name).is_gpu
    cheap = [t for t in catalog.CATALOG.values() if t.gpu_count == 1]
    assert len(cheap) >= 2 and all(t.price_usd_per_hour < 2 for t in cheap)
    assert catalog.SYSTEM_TYPES and all(not catalog.get(t).is_gpu for t in catalog.SYSTEM_TYPES)


def test_p6_b300_has_more_cards_than_efa_interfaces():
    t = catalog.get("p6-b300.48xlarge")
    assert (t.network_cards, t.max_efa_interfaces, t.efa_cards[0]) == (17, 16, 1)


@pytest.mark.parametrize("name", list(catalog.CATALOG))
def test_every_entry_has_a_dated_price_and_peak(name):
    t = catalog.get(name)
    assert t.price_usd_per_hour > 0
    assert re.fullmatch(r"\d{4}-\d{2}", t.price_date)
    assert t.price_source.startswith("https://") or "estimate" in t.price_source
    if t.is_gpu:
        assert t.peak_bf16_tflops_per_gpu > 0


def test_price_override_wins_and_unknown_type_is_named():
    assert catalog.price("p5.48xlarge", {"p5.48xlarge": 40.0}) == 40.0
    assert catalog.price("p5.48xlarge") == catalog.get("p5.48xlarge").price_usd_per_hour
    with pytest.raises(KeyError, match="'p9.1xlarge' is not in the catalog; known: p4d.24xlarge"):
        catalog.get("p9.1xlarge")
