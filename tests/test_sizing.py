"""Sizing: hand-worked examples, every validation message, the size CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.verbs import size as size_cli
from components.core.config.values import parse_quantity
from components.core.planning import sizing
from components.core.planning.sizing import SizingError, SizingInput, size

REPO = Path(__file__).resolve().parents[1]
P5 = "p5.48xlarge"
# p5.48xlarge: 8 x H100 with 80 GiB each = 80 * 2**30 B = 85.899 GB; the model state
# may take 75% of it = 64.425 GB.
P5_GPU_GB = 80 * 2**30 / 1e9
P5_LIMIT_GB = 0.75 * P5_GPU_GB


def test_parse_quantity_accepts_suffixes_case_insensitively():
    assert parse_quantity("7e9") == 7e9
    assert parse_quantity("70B") == 70e9
    assert parse_quantity("13b") == 13e9
    assert parse_quantity("1.5T") == 1.5e12
    assert parse_quantity("500m") == 500e6
    assert parse_quantity("2k") == 2000
    assert parse_quantity(3e9) == 3e9
    for bad in ("", "B", "7 billion", "1e", "-3B", "7X"):
        with pytest.raises(ValueError):
            parse_quantity(bad)


def test_stage0_7b_on_one_p5_node_does_not_fit_on_any_count():
    # 16 B/param * 7e9 = 112 GB per GPU, whatever the node count: > 64.4 GB.
    r = size(SizingInput(params=7e9, instance_type=P5, nodes=1))
    assert r.gpus == 8 and r.data_parallel == 8
    assert r.model_state_gb_per_gpu == pytest.approx(112.0)
    assert r.gpu_memory_gb == pytest.approx(P5_GPU_GB)
    assert r.model_state_limit_gb == pytest.approx(P5_LIMIT_GB)
    assert r.headroom_gb == pytest.approx(P5_GPU_GB - 112.0)
    assert r.fits is False
    assert r.min_nodes is None and r.min_gpus is None
    assert any("never fits at ZeRO stage 0" in note for note in r.notes)


def test_stage3_7b_on_8_gpus_fits():
    # 16 * 7e9 / 8 = 14 GB per GPU <= 64.4 GB; one node is already enough.
    r = size(SizingInput(params="7B", instance_type=P5, nodes=1, zero_stage=3))
    assert r.model_state_gb_per_gpu == pytest.approx(14.0)
    assert r.fits is True
    assert r.min_nodes == 1 and r.min_gpus == 8


def test_stage1_and_stage2_formulas():
    # 7e9 params on 16 GPUs (Nd = 16):
    # stage 1: 4 * 7e9 + 12 * 7e9 / 16 = 28 + 5.25 = 33.25 GB
    # stage 2: 2 * 7e9 + 14 * 7e9 / 16 = 14 + 6.125 = 20.125 GB
    one = size(SizingInput(params=7e9, instance_type=P5, nodes=2, zero_stage=1))
    two = size(SizingInput(params=7e9, instance_type=P5, nodes=2, zero_stage=2))
    assert one.model_state_gb_per_gpu == pytest.approx(33.25)
    assert two.model_state_gb_per_gpu == pytest.approx(20.125)
    # stage 1 on one node: 28 + 12 * 7 / 8 = 38.5 GB fits, so the minimum is 1 node.
    assert one.min_nodes == 1


def test_70b_stage3_on_two_p5_nodes_needs_three():
    # 16 * 70e9 / 16 GPUs = 70 GB > 64.4 GB: no. 3 nodes: 16 * 70e9 / 24 = 46.7 GB: yes.
    r = size(SizingInput(params="70B", instance_type=P5, nodes=2, zero_stage=3))
    assert r.model_state_gb_per_gpu == pytest.approx(70.0)
    assert r.fits is False
    assert r.min_nodes == 3 and r.min_gpus == 24


def test_model_parallelism_shards_first_and_min_nodes_keeps_divisibility():
    # 70e9 params, tp 8 x pp 2 = 16: P' = 4.375e9. 4 nodes = 32 GPUs, Nd = 2.
    # stage 1: 4 * 4.375e9 + 12 * 4.375e9 / 2 = 17.5 + 26.25 = 43.75 GB: fits.
    # 1 node (8 GPUs) is not a multiple of 16; 2 nodes: Nd = 1, 16 * 4.375 = 70 GB: no;
    # 3 nodes (24) not a multiple of 16; so 4 nodes is the minimum.
    r = size(SizingInput(params=70e9, instance_type=P5, nodes=4, zero_stage=1, tp=8, pp=2))
    assert r.data_parallel == 2
    assert r.model_state_gb_per_gpu == pytest.approx(43.75)
    assert r.fits is True
    assert r.min_nodes == 4


def test_tp_across_nodes_is_noted():
    r = size(SizingInput(params=70e9, instance_type=P5, nodes=2, tp=16))
    assert any("--tp 16 spans nodes" in note for note in r.notes)


def test_stage2_never_fits_when_the_unsharded_part_is_too_big():
    # 1e12 params at stage 2: the bf16 weights alone are 2 * 1e12 = 2000 GB per GPU.
    r = size(SizingInput(params="1T", instance_type=P5, nodes=4, zero_stage=2))
    assert r.fits is False and r.min_nodes is None
    assert any("ZeRO stage 2" in note for note in r.notes)


def test_training_time_and_cost_7b_1t_tokens_16_h100_mfu_04():
    # 6 * 7e9 * 1e12 = 4.2e22 FLOPs over 16 GPUs at 0.4 * 989 TFLOP/s:
    seconds = 6 * 7e9 * 1e12 / (16 * 0.4 * 989e12)  # 6.6356e6 s
    r = size(SizingInput(params=7e9, tokens="1T", instance_type=P5, nodes=2, zero_stage=3, mfu=0.4))
    assert r.flops_per_token == pytest.approx(4.2e10)
    assert r.total_flops == pytest.approx(4.2e22)
    assert r.achieved_tflops_per_gpu == pytest.approx(395.6)
    assert r.training_days == pytest.approx(seconds / 86400)  # about 76.8 days
    assert r.training_days == pytest.approx(76.8, abs=0.05)
    assert r.gpu_hours == pytest.approx(16 * seconds / 3600)
    assert r.node_hours == pytest.approx(2 * seconds / 3600)
    assert r.price_usd_per_hour == 55.04
    assert r.cost_usd == pytest.approx(2 * seconds / 3600 * 55.04)  # about $202,900


def test_recompute_uses_8_flops_per_param_token():
    base = size(SizingInput(params=7e9, tokens=1e12, instance_type=P5, nodes=2, mfu=0.4))
    again = size(SizingInput(params=7e9, tokens=1e12, instance_type=P5, nodes=2, mfu=0.4, recompute=True))
    assert again.flops_per_token == pytest.approx(8 * 7e9)
    assert again.training_days == pytest.approx(base.training_days * 8 / 6)
    assert any("hardware FLOPs utilization" in note for note in again.notes)


def test_achieved_tflops_and_price_override():
    # 7e9 * 6 * 1e12 / (8 GPUs * 400e12) s; 1 node at the overridden $40/h.
    seconds = 6 * 7e9 * 1e12 / (8 * 400e12)
    r = size(SizingInput(params=7e9, tokens=1e12, instance_type=P5, nodes=1, achieved_tflops=400,
                         price_overrides={P5: 40.0}))
    assert r.training_days == pytest.approx(seconds / 86400)
    assert r.cost_usd == pytest.approx(seconds / 3600 * 40.0)


def test_achieved_tflops_above_peak_is_noted_not_rejected():
    r = size(SizingInput(params=7e9, tokens=1e12, instance_type=P5, nodes=1, achieved_tflops=1500))
    assert r.training_days is not None
    assert any("exceeds the dense BF16 peak of H100" in note for note in r.notes)


def test_gpus_only_leaves_fit_and_cost_null():
    # 16 * 13e9 = 208 GB per GPU; no type: no memory to compare with, no price.
    r = size(SizingInput(params="13b", tokens="300B", gpus=16, achieved_tflops=400))
    assert r.model_state_gb_per_gpu == pytest.approx(208.0)
    assert r.gpu_memory_gb is None and r.headroom_gb is None
    assert r.fits is None and r.min_nodes is None and r.min_gpus is None
    assert r.nodes is None and r.instance_type is None
    assert r.training_days == pytest.approx(6 * 13e9 * 300e9 / (16 * 400e12) / 86400)
    assert r.cost_usd is None


def test_gpus_with_instance_type_is_whole_nodes():
    r = size(SizingInput(params=7e9, gpus=16, instance_type=P5, zero_stage=3))
    assert r.nodes == 2 and r.gpus == 16


def test_missing_tokens_or_throughput_gives_nulls_with_notes():
    no_tokens = size(SizingInput(params=7e9, instance_type=P5, nodes=1, mfu=0.4))
    assert no_tokens.training_days is None and no_tokens.cost_usd is None
    assert any("no --tokens" in note for note in no_tokens.notes)
    no_rate = size(SizingInput(params=7e9, tokens=1e12, instance_type=P5, nodes=1))
    assert no_rate.total_flops == pytest.approx(4.2e22)
    assert no_rate.training_days is None and no_rate.gpu_hours is None and no_rate.cost_usd is None
    assert any("no --mfu or --achieved-tflops" in note for note in no_rate.notes)


def test_to_dict_has_the_contract_keys():
    d = size(SizingInput(params=7e9, tokens=1e12, instance_type=P5, nodes=2, mfu=0.4)).to_dict()
    for key in ("model_state_gb_per_gpu", "fits", "min_nodes", "training_days", "cost_usd", "gpus",
                "data_parallel", "gpu_memory_gb", "headroom_gb", "flops_per_token", "gpu_hours",
                "instance_type", "notes"):
        assert key in d
    json.dumps(d, allow_nan=False)


def _errors(**kwargs) -> list[str]:
    with pytest.raises(SizingError) as info:
        size(SizingInput(**kwargs))
    return info.value.messages


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"params": 7e9, "gpus": 8, "zero_stage": 5}, "--zero-stage: got 5; allowed 0, 1, 2, 3"),
    ({"params": 7e9, "gpus": 8, "mfu": 1.5, "instance_type": None}, "--mfu: got 1.5; must be > 0 and <= 1"),
    ({"params": 7e9, "instance_type": P5, "nodes": 1, "mfu": 0.0}, "--mfu: got 0; must be > 0 and <= 1"),
    ({"params": 7e9, "gpus": 12, "tp": 16}, "--tp x --pp (16) must divide --gpus (12)"),
    ({"params": 7e9, "instance_type": P5, "nodes": 1, "tp": 4, "pp": 4},
     "--tp x --pp (16) must divide the GPU count (8 = --nodes 1 x 8 GPUs of p5.48xlarge)"),
    ({"params": 7e9, "gpus": 8, "tp": 0}, "--tp: got 0; must be an integer >= 1"),
    ({"params": 7e9, "gpus": 8, "pp": -1}, "--pp: got -1; must be an integer >= 1"),
    ({"params": 7e9, "gpus": 0}, "--gpus: got 0; must be an integer >= 1"),
    ({"params": 7e9, "instance_type": P5, "nodes": 0}, "--nodes: got 0; must be an integer >= 1"),
    ({"params": 7e9, "gpus": 8, "mfu": 0.4, "achieved_tflops": 300},
     "--mfu and --achieved-tflops are mutually exclusive; give one"),
    ({"params": 7e9, "gpus": 8, "achieved_tflops": -1.0}, "--achieved-tflops: got -1; must be > 0"),
    ({"params": 7e9, "gpus": 8, "instance_type": P5, "nodes": 1},
     "--gpus and --nodes are mutually exclusive: give --gpus N, or --instance-type T --nodes K"),
    ({"params": 7e9}, "give the GPU count: --gpus N, or --instance-type T --nodes K"),
    ({"params": 7e9, "nodes": 2}, "--nodes needs --instance-type (GPUs per node come from the type)"),
    ({"params": 7e9, "gpus": 8, "mfu": 0.4},
     "--mfu needs --instance-type (the peak TFLOP/s comes from the GPU model); or give --achieved-tflops"),
    ({"params": 7e9, "gpus": 12, "instance_type": P5},
     "--gpus: got 12; p5.48xlarge has 8 GPUs per node, so give a multiple of that (or --nodes)"),
    ({"params": "seven", "gpus": 8},
     "--params: got 'seven'; expected a number such as 7e9, 70B, 1.5T, 500M (suffixes K, M, B, T)"),
    ({"params": 0, "gpus": 8}, "--params: got 0; must be > 0"),
    ({"params": 7e9, "tokens": "lots", "gpus": 8},
     "--tokens: got 'lots'; expected a number such as 7e9, 70B, 1.5T, 500M (suffixes K, M, B, T)"),
])
def test_each_validation_message(kwargs, message):
    assert message in _errors(**kwargs)


def test_unknown_and_gpu_less_instance_types_list_the_known_ones():
    known = ", ".join(sizing.catalog.GPU_TYPES)
    assert _errors(params=7e9, instance_type="p9.huge", nodes=1) == [
        f"--instance-type: got p9.huge; known GPU types: {known}"]
    assert _errors(params=7e9, instance_type="m7i.large", nodes=1) == [
        f"--instance-type: got m7i.large, which has no GPUs; known GPU types: {known}"]


def test_all_problems_are_reported_at_once():
    messages = _errors(params="x", tokens="y", gpus=12, zero_stage=7, tp=16, mfu=2.0, achieved_tflops=1.0)
    assert len(messages) == 7
    assert str(SizingError(messages)) == "\n".join(messages)


# --- CLI -----------------------------------------------------------------


def test_cli_human_report(capsys):
    code = size_cli.main(["--params", "70B", "--tokens", "1T", "--instance-type", P5, "--nodes", "2",
                          "--zero-stage", "3", "--mfu", "0.4"])
    out = capsys.readouterr().out
    assert code == 0
    assert "model state 70.0 GB per GPU of 85.9 GB" in out
    assert "limit 64.4 GB" in out
    assert "Fits:      no; needs at least 3 nodes (24 GPUs)" in out
    assert "days" in out and "GPU-hours" in out and "Cost:      $" in out


def test_cli_fits_yes(capsys):
    assert size_cli.main(["--params", "7e9", "--instance-type", P5, "--nodes", "1", "--zero-stage", "3"]) == 0
    assert "Fits:      yes (the minimum is 1 node)" in capsys.readouterr().out


def test_cli_json_is_one_object(capsys):
    code = size_cli.main(["--params", "7e9", "--tokens", "1e12", "--instance-type", P5, "--nodes", "2",
                          "--mfu", "0.4", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    assert data["model_state_gb_per_gpu"] == pytest.approx(112.0)
    assert data["fits"] is False and data["min_nodes"] is None
    assert data["cost_usd"] == pytest.approx(2 * 6 * 7e9 * 1e12 / (16 * 0.4 * 989e12) / 3600 * 55.04)
    assert {"training_days", "gpus", "data_parallel", "gpu_memory_gb", "headroom_gb", "flops_per_token",
            "gpu_hours", "instance_type", "notes"} <= set(data)


def test_cli_bad_input_exits_2_with_every_message(capsys):
    code = size_cli.main(["--params", "70B", "--gpus", "12", "--tp", "16", "--zero-stage", "5",
                          "--mfu", "1.5", "--achieved-tflops", "100"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "size: error: --zero-stage: got 5; allowed 0, 1, 2, 3" in captured.err
    assert "size: error: --mfu: got 1.5; must be > 0 and <= 1" in captured.err
    assert "size: error: --tp x --pp (16) must divide --gpus (12)" in captured.err
    assert "mutually exclusive" in captured.err
    assert "Traceback" not in captured.err


def test_cli_argparse_errors_exit_2(capsys):
    assert size_cli.main(["--gpus", "8"]) == 2  # --params missing
    assert size_cli.main(["--params", "7B", "--gpus", "many"]) == 2
    err = capsys.readouterr().err
    assert "--params" in err and "invalid int value: 'many'" in err


def test_python_m_bootstrap_size():
    ok = subprocess.run([sys.executable, "-m", "bootstrap", "size", "--params", "7B", "--instance-type", P5,
                         "--nodes", "1", "--zero-stage", "3", "--json"],
                        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["fits"] is True
    bad = subprocess.run([sys.executable, "-m", "bootstrap", "size", "--params", "7B", "--gpus", "8",
                          "--zero-stage", "9"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "--zero-stage: got 9; allowed 0, 1, 2, 3" in bad.stderr and "Traceback" not in bad.stderr
