"""NCCL/EFA presets per instance type, merge semantics, expected bus bandwidth."""

from __future__ import annotations

import pytest

from components.core.hardware import catalog, nccl

EFA_TYPES = [name for name in catalog.GPU_TYPES if catalog.get(name).efa_supported]
NON_EFA_GPU_TYPES = [name for name in catalog.GPU_TYPES if not catalog.get(name).efa_supported]
P5_FAMILY = ["p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge"]


def test_type_lists_cover_the_catalog():
    assert {"p4d.24xlarge", "p5.48xlarge", "g6e.48xlarge"} <= set(EFA_TYPES)
    assert {"g6e.xlarge", "g5.xlarge", "g6.xlarge"} <= set(NON_EFA_GPU_TYPES)


@pytest.mark.parametrize("name", EFA_TYPES)
def test_efa_preset_has_the_awsome_distributed_training_settings(name):
    env = nccl.preset_env(name)
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_FORK_SAFE"] == "1"
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["NCCL_SOCKET_IFNAME"] == "^lo,docker"
    # Left to aws-ofi-nccl, which picks its tuner and these sizes (awsome-distributed-ai #1077).
    assert not {"NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_TUNER_PLUGIN"} & set(env)
    assert "NCCL_NET" not in env
    assert all(isinstance(value, str) for value in env.values())


@pytest.mark.parametrize("name", EFA_TYPES + NON_EFA_GPU_TYPES)
def test_torch_jobs_add_pytorch_settings(name):
    env = nccl.preset_env(name, torch=True)
    assert env == {**nccl.preset_env(name), "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                   "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


@pytest.mark.parametrize("name", ["p4d.24xlarge", "p4de.24xlarge"])
def test_p4_sets_device_rdma(name):
    assert nccl.preset_env(name)["FI_EFA_USE_DEVICE_RDMA"] == "1"


@pytest.mark.parametrize("name", P5_FAMILY + ["g6e.48xlarge", "g5.48xlarge"])
def test_p5_family_and_newer_leave_device_rdma_unset(name):
    assert "FI_EFA_USE_DEVICE_RDMA" not in nccl.preset_env(name)


@pytest.mark.parametrize("name", NON_EFA_GPU_TYPES)
def test_non_efa_types_get_no_libfabric_settings(name):
    env = nccl.preset_env(name)
    assert env == {"NCCL_SOCKET_IFNAME": "^lo,docker", "NCCL_DEBUG": "INFO"}
    assert not any(key.startswith("FI_") for key in env)


def test_preset_returns_a_fresh_dict():
    nccl.preset_env("p5.48xlarge")["FI_PROVIDER"] = "tcp"
    assert nccl.preset_env("p5.48xlarge")["FI_PROVIDER"] == "efa"


def test_unknown_type_is_a_key_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="known: p4d.24xlarge"):
        nccl.preset_env("p9.huge")


def test_merge_overrides_win_and_empty_or_none_removes():
    preset = nccl.preset_env("p4d.24xlarge")
    merged = nccl.merge_env(preset, {
        "NCCL_DEBUG": "WARN",  # override wins
        "FI_EFA_USE_DEVICE_RDMA": None,  # None removes
        "NCCL_TUNER_PLUGIN": "",  # "" removes
        "NCCL_NOT_IN_PRESET": None,  # removing a missing key is fine
        "HOROVOD_FUSION_THRESHOLD": 67108864,  # numbers become strings
        "NCCL_IB_DISABLE": "1",
    })
    assert merged["NCCL_DEBUG"] == "WARN"
    assert "FI_EFA_USE_DEVICE_RDMA" not in merged and "NCCL_TUNER_PLUGIN" not in merged
    assert "NCCL_NOT_IN_PRESET" not in merged
    assert merged["HOROVOD_FUSION_THRESHOLD"] == "67108864"
    assert merged["NCCL_IB_DISABLE"] == "1"
    assert merged["FI_PROVIDER"] == "efa"  # untouched keys stay
    assert preset["NCCL_DEBUG"] == "INFO" and "FI_EFA_USE_DEVICE_RDMA" in preset  # preset not mutated


def test_merge_without_overrides_copies():
    preset = nccl.preset_env("g5.xlarge")
    merged = nccl.merge_env(preset, None)
    assert merged == preset and merged is not preset


@pytest.mark.parametrize("value", [True, ["a"], {"x": 1}])
def test_merge_rejects_non_scalar_values(value):
    with pytest.raises(TypeError, match="NCCL_DEBUG"):
        nccl.merge_env({}, {"NCCL_DEBUG": value})


def test_classic_knobs_are_plain_overrides():
    knobs = ("NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_BUFFSIZE", "HOROVOD_FUSION_THRESHOLD",
             "TF_ENABLE_AUTO_MIXED_PRECISION")
    merged = nccl.merge_env(nccl.preset_env("p5.48xlarge"), {key: "7" for key in knobs})
    assert all(merged[key] == "7" for key in knobs)


def test_measured_bus_bandwidth():
    # FACTS.md: 2x p5.48xlarge about 487 GB/s at 16 GiB; 2x p4de.24xlarge about 78 GB/s at 2 GiB;
    # p4d has the same fabric as p4de.
    assert nccl.expected_busbw_gbps("p5.48xlarge") == (487.0, "16 GiB")
    assert nccl.expected_busbw_gbps("p4de.24xlarge") == (78.0, "2 GiB")
    assert nccl.expected_busbw_gbps("p4d.24xlarge") == (78.0, "2 GiB")
    for name in ("p5.48xlarge", "p4de.24xlarge", "p4d.24xlarge"):
        assert nccl.busbw_reference(name).estimate is False


@pytest.mark.parametrize(("name", "expected"), [
    ("p5e.48xlarge", (487.0, "16 GiB")),  # 3200 Gbps like p5
    ("p5en.48xlarge", (487.0, "16 GiB")),
    ("p6-b200.48xlarge", (487.0, "16 GiB")),
    ("p6-b300.48xlarge", (974.0, "16 GiB")),  # 6400 Gbps: twice p5
    ("g6e.48xlarge", (78.0, "2 GiB")),  # 400 Gbps like p4d
    ("g5.48xlarge", (19.5, "2 GiB")),  # 100 Gbps: a quarter of p4d
])
def test_other_efa_types_are_scaled_estimates(name, expected):
    assert nccl.expected_busbw_gbps(name) == expected
    ref = nccl.busbw_reference(name)
    assert ref.estimate is True and ref.source.startswith("estimate:")


@pytest.mark.parametrize("name", NON_EFA_GPU_TYPES + ["m7i.large"])
def test_no_bus_bandwidth_reference_without_efa(name):
    assert nccl.expected_busbw_gbps(name) is None
    assert nccl.busbw_reference(name) is None


def test_pass_fraction():
    assert nccl.BUSBW_PASS_FRACTION == 0.8


@pytest.mark.parametrize(("size", "text"), [
    (8, "8 B"), (1023, "1023 B"), (1024, "1 KiB"), (524288, "512 KiB"), (2**31, "2 GiB"),
    (16 * 2**30, "16 GiB"), (2**40, "1 TiB"),
])
def test_format_bytes(size, text):
    assert nccl.format_bytes(size) == text


def test_efa_turned_off_on_an_efa_type_gets_the_socket_preset():
    from components.core.hardware import nccl as presets

    env = presets.preset_env("p4de.24xlarge", efa=False)
    assert "FI_PROVIDER" not in env and "FI_EFA_USE_DEVICE_RDMA" not in env
    assert env == presets.preset_env("g6e.xlarge")
