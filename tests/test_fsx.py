"""FSx helpers (links, paths, security group rules, throughput) and the storage config's bad cases."""

from __future__ import annotations

import pytest

from components.core.config import FsxConfig, StorageConfig
from components.core.problems import ConfigError
from components.core.stack_config import parse as parse_stack
from components.core.storage import fsx
from tests.conftest import stack_config, stack_raw

SCRATCH = FsxConfig()  # SCRATCH_2, 1,200 GiB
PROD_FSX = FsxConfig(deployment_type="PERSISTENT_2", storage_capacity_gib=48000, throughput_per_tib=500)


# -- S3 links ------------------------------------------------------------------


def test_prefixes_are_directories_under_the_mount():
    assert fsx.directory("datasets/") == "/datasets"
    assert fsx.directory("team/a/ckpt/") == "/team/a/ckpt"


def test_one_link_the_whole_bucket_at_the_root_with_every_event():
    # One association: a second at once fails (terraform-provider-aws #24678), and "/" must be the only one.
    link = fsx.BucketLink()
    assert (link.file_system_path, link.batch_import) == ("/", True)
    assert fsx.BucketLink.data_repository_path("b") == "s3://b/"
    assert fsx.DRA_EVENTS == ("NEW", "CHANGED", "DELETED")


def test_time_to_ready_counts_the_one_link():
    assert fsx.time_to_ready_minutes(StorageConfig()) == 10 + 7
    assert fsx.time_to_ready_minutes(StorageConfig(s3_link=False)) == 10


# -- security group rules ------------------------------------------------------------


def _rows(rules):
    return [(r.direction, r.protocol, r.from_port, r.to_port, r.slug) for r in rules]


def test_file_system_group_admits_and_reaches_lustre_ports():
    assert fsx.LUSTRE_TCP_PORTS == ((988, 988), (1018, 1023))
    assert _rows(fsx.file_system_rules(False)) == [
        ("ingress", "tcp", 988, 988, "ingress-tcp-988"),
        ("ingress", "tcp", 1018, 1023, "ingress-tcp-1018-1023"),
        ("egress", "tcp", 988, 988, "egress-tcp-988"),
        ("egress", "tcp", 1018, 1023, "egress-tcp-1018-1023"),
    ]


def test_efa_file_system_group_adds_all_traffic_both_ways():
    assert _rows(fsx.file_system_rules(True))[4:] == [
        ("ingress", "-1", None, None, "ingress-all"),
        ("egress", "-1", None, None, "egress-all"),
    ]


def test_clients_admit_the_file_servers():
    assert _rows(fsx.client_rules(False)) == [
        ("ingress", "tcp", 988, 988, "ingress-tcp-988"),
        ("ingress", "tcp", 1018, 1023, "ingress-tcp-1018-1023"),
    ]
    assert _rows(fsx.client_rules(True))[-1] == ("ingress", "-1", None, None, "ingress-all")


# -- throughput ------------------------------------------------------------------


def test_aggregate_throughput_is_capacity_in_tib_times_tier():
    assert SCRATCH.aggregate_throughput_mbps == 1200 / 1000 * 200
    assert PROD_FSX.aggregate_throughput_mbps == 48000 / 1000 * 500  # 24,000 MB/s


def test_no_warning_when_the_file_system_keeps_up():
    # prod: 128 H100 x 100 MB/s = 12,800 MB/s < 23,437.5 MB/s
    assert fsx.throughput_warning(PROD_FSX, 128, 100.0) is None
    assert fsx.throughput_warning(SCRATCH, 2, 100.0) is None
    assert fsx.throughput_warning(SCRATCH, 0, 100.0) is None


def test_scratch_warning_names_the_capacity_that_suffices():
    # 16 GPUs x 100 = 1,600 MB/s at 200 MB/s/TiB needs 8 TiB = 8,192 GiB -> 9,600 GiB.
    assert fsx.throughput_warning(SCRATCH, 16, 100.0) == (
        "FSx SCRATCH_2 1200 GiB reads 240 MB/s, below the 1,600 MB/s that 16 GPUs x 100 MB/s need; "
        "raise storageCapacityGiB to 9600")


def test_persistent_warning_offers_a_tier_first():
    f = FsxConfig(deployment_type="PERSISTENT_2", storage_capacity_gib=2400, throughput_per_tib=125)
    # 8 x 100 = 800 MB/s; 2400 GiB gives 300 MB/s at 125, 1,200 MB/s at 500; 800/125 TiB = 6,400 GiB -> 7,200.
    assert fsx.throughput_warning(f, 8, 100.0) == (
        "FSx PERSISTENT_2 2400 GiB reads 300 MB/s, below the 800 MB/s that 8 GPUs x 100 MB/s need; "
        "raise throughputPerTiB to 500 or storageCapacityGiB to 7200")


def test_persistent_warning_without_a_tier_that_suffices():
    f = FsxConfig(deployment_type="PERSISTENT_2", storage_capacity_gib=1200, throughput_per_tib=1000)
    assert fsx.throughput_warning(f, 64, 100.0) == (
        "FSx PERSISTENT_2 1200 GiB reads 1,200 MB/s, below the 6,400 MB/s that 64 GPUs x 100 MB/s need; "
        "raise storageCapacityGiB to 7200")


def test_the_stacks_storage_parses():
    dev, prod = stack_config("dev").storage, stack_config("prod").storage
    assert (dev.fsx.deployment_type, dev.fsx.storage_capacity_gib, dev.retain_on_destroy) == ("SCRATCH_2", 1200, False)
    assert prod.fsx == FsxConfig(deployment_type="PERSISTENT_2", storage_capacity_gib=48000, throughput_per_tib=500,
                                 backup_retention_days=0, final_backup_on_delete=False)
    assert (prod.dataset_prefix, prod.checkpoint_prefix, prod.retain_on_destroy) == ("datasets/", "checkpoints/", True)


# -- bad storage config ------------------------------------------------------------

PREFIX = "must be an S3 key prefix such as datasets/ (no leading /, ending in /)"


@pytest.mark.parametrize(("storage", "message"), [
    ({"fsx": {"storageCapacityGiB": 3000}},
     "gpucluster:storage.fsx.storageCapacityGiB: got 3000; allowed: 1200, 2400, or a multiple of 2400"),
    ({"fsx": {"deploymentType": "PERSISTENT_2", "storageCapacityGiB": 2400, "throughputPerTiB": 333}},
     "gpucluster:storage.fsx.throughputPerTiB: got 333; allowed: 125, 250, 500, 1000 (MB/s/TiB)"),
    ({"fsx": {"deploymentType": "SCRATCH_2", "throughputPerTiB": 250}},
     "gpucluster:storage.fsx.throughputPerTiB: got 250; applies to PERSISTENT_2 only; "
     "SCRATCH_2 has a fixed 200 MB/s/TiB, remove the key"),
    ({"fsx": {"deploymentType": "SCRATCH_2", "efaEnabled": True}},
     "gpucluster:storage.fsx.efaEnabled: got true; EFA-enabled FSx needs deploymentType PERSISTENT_2, not SCRATCH_2"),
    ({"datasetPrefix": "/data"}, f"gpucluster:storage.datasetPrefix: got '/data'; {PREFIX}"),
    ({"datasetPrefix": "data"}, f"gpucluster:storage.datasetPrefix: got 'data'; {PREFIX}"),
    ({"datasetPrefix": "a//b/"}, f"gpucluster:storage.datasetPrefix: got 'a//b/'; {PREFIX}"),
], ids=["capacity-3000", "tier-333", "tier-on-scratch", "efa-on-scratch", "leading-slash", "no-trailing-slash",
        "empty-segment"])
def test_bad_storage_config_is_reported_with_its_key_value_and_what_is_allowed(storage, message):
    raw = stack_raw("dev", {"gpucluster:storage": storage})
    with pytest.raises(ConfigError) as info:
        parse_stack(raw, "gpucluster", "dev")
    assert [str(p) for p in info.value.problems] == [message]
