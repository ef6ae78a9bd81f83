"""The plan's "Goodput" section: each job's expected share of paid GPU time that trains, from its checkpoint
interval and size at the FSx throughput, failures at the stated rate, restarts and its first start, and the
interval that maximises it (components.core.planning.goodput)."""

from __future__ import annotations

import json
import math

import pytest

from bootstrap.offline import plan_report, plan_text
from components.core.config.observability import NODE_FAILURES_PER_DAY_DEFAULT
from components.core.planning import goodput, startup
from tests.conftest import plan, recording, stack_config

P5 = 55.04  # p5.48xlarge, the catalog's us-east-1 list price per node-hour
HEADER = "Goodput (expected: the share of each job's paid GPU time that trains; README, Goodput)"
ASSUMES = ("  assumes 0.0038 unexpected failures per node-day (observability.goodput.nodeFailuresPerDay; Meta's Llama 3 "
           "run on H100s: 419 unexpected interruptions in 54 days on 2,048 nodes), each losing half a checkpoint "
           "interval of work and a restart (a replacement node's first step, then reading the checkpoint back); "
           "checkpoints written at the file system's {mbps} MB/s ({kind}) while the job waits (an asynchronous "
           "checkpoint hides most of that); best interval sqrt(2 x write time x MTBF) (Young 1974, Daly 2006)")
JOB_KEYS = ["checkpoint", "expectedFailures", "goodput", "gpus", "lost", "minutes", "mtbfHours", "name", "nodes",
            "optimum", "pool", "pricePerNodeHour", "restartMinutes", "runFrom", "startupMinutes", "trainingHours",
            "upperBound", "warnings"]
SECTION_KEYS = ["checkpointBytesPerParam", "failuresSource", "fsxDeploymentType", "fsxWriteMBps", "jobs",
                "nodeFailuresPerDay", "warnPoints", "warnings"]
SCRATCH = {"fsx": {"deploymentType": "SCRATCH_2", "storageCapacityGiB": 1200}, "s3Link": True}


def big(every: int, **more) -> dict:
    """A 16-node p5 job training a 70B model on 300B tokens (prod's llama-70b, our image: no cache)."""
    return {"name": "big", "pool": "h100", "nodes": 16, "launcher": "torchrun", "image": "repo/train:1.0",
            "command": ["python", "train.py"], "checkpoint": {"everyMinutes": every},
            "model": {"params": "70B", "tokens": "300B", "tp": 8, "recompute": True}, **more}


def section(stack: str = "prod", overrides: dict | None = None) -> dict:
    return goodput.plan(stack_config(stack, {"gpucluster:teams": [], **(overrides or {})}
                                     if stack == "prod" else overrides))


def text(out: str) -> list[str]:
    return out.split(f"\n{HEADER}\n", 1)[1].split("\n\n", 1)[0].splitlines()


# -- the values it rests on -------------------------------------------------------------------------


def test_the_assumptions_it_rests_on():
    # "The Llama 3 Herd of Models" (arXiv 2407.21783) 3.3.4: 419 unexpected interruptions in 54 days on 16,384
    # H100s, 8 to a node.
    assert NODE_FAILURES_PER_DAY_DEFAULT == round(419 / (54 * 16384 / 8), 4) == 0.0038
    # bf16 weights 2 + fp32 master weights 4 + Adam momentum 4 + variance 4 (no gradients in a checkpoint).
    assert goodput.CHECKPOINT_BYTES_PER_PARAM == 2 + 4 + 4 + 4
    assert goodput.EVERY_MINUTES_RANGE == (1, 1440) and goodput.WARN_POINTS == 5
    # FSx writes at the provisioned throughput: capacity in TiB (1,000 GiB each, as FSx counts) x MB/s per TiB.
    assert (section()["fsxWriteMBps"], section("dev")["fsxWriteMBps"]) == (48000 / 1000 * 500, 1200 / 1000 * 200)


def test_startup_and_restart_reuse_the_plans_time_to_first_step():
    report = json.loads(plan("--stack", "prod", "--json").stdout)
    rows = {j["name"]: j for j in report["jobs"]}
    for j in report["goodput"]["jobs"]:
        assert j["startupMinutes"] == rows[j["name"]]["timeToFirstStep"]["total_minutes"] == 9.7
    # A restart: one replacement node's first step through the cache, then the checkpoint read back.
    llama = report["goodput"]["jobs"][0]
    one = startup.time_to_first_step(1, gpu=True, through_cache=True).total_minutes
    assert llama["restartMinutes"] == round(one + 70e9 * 14 / 24000e6 / 60, 2) == 10.38


# -- the shipped stacks ------------------------------------------------------------------------------


def test_prods_llama_70b_exact():
    s = section()
    assert sorted(s) == SECTION_KEYS
    assert [j["name"] for j in s["jobs"]] == ["llama-70b", "gpt-pretrain"]  # not the fabric test
    llama = s["jobs"][0]
    assert sorted(llama) == JOB_KEYS
    # 70e9 x 14 B = 980 GB = 912.7 GiB, at 24,000 MB/s: 40.8 s.
    assert llama["checkpoint"] == {"everyMinutes": 30, "sizeGiB": 912.7, "sizeFrom": "model", "writeMBps": 24000.0,
                                   "writeMinutes": 0.68, "blocking": True}
    # 38.4 days (the model sizing's); 0.0038 x 16 nodes x 38.4 days = 2.3347 failures, one per 16.4 days.
    assert (llama["trainingHours"], llama["expectedFailures"], llama["mtbfHours"]) == (921.6, 2.3347, 394.7)
    assert llama["minutes"] == {"training": 55295.8, "checkpointing": 1254.394, "lostWork": 35.021,
                                "firstStart": 9.7, "restarts": 24.236}
    assert (llama["goodput"], llama["upperBound"], llama["runFrom"]) == (0.9766, False, "model")
    assert llama["lost"] == {"gpuHoursPerDay": 71.8, "usdPerDay": 493.99, "gpuHoursOverRun": 2823.1,
                             "usdOverRun": 19423.26}
    # sqrt(2 x 0.6806 min x 23,684 min) = 179.5: checkpointing every 30 min costs 1.5 points, no warning.
    assert llama["optimum"] == {"everyMinutes": 180, "exactMinutes": 179.5, "goodput": 0.9919, "points": 1.52,
                                "usdPerDay": 322.21, "usdOverRun": 12772.59}
    assert llama["warnings"] == [] and s["warnings"] == []


def test_a_job_without_a_model_is_modelled_per_day_as_an_upper_bound():
    gpt = section()["jobs"][1]
    assert gpt["checkpoint"]["sizeGiB"] is None and gpt["optimum"] is None
    assert (gpt["runFrom"], gpt["trainingHours"], gpt["upperBound"]) == ("perDay", 24, True)
    # 0.0038 x 2 nodes a day; each loses 15 min of work and a 9.7-min restart (no checkpoint to read back).
    assert gpt["minutes"] == {"training": 1440, "checkpointing": 0, "lostWork": 0.114, "firstStart": 9.7,
                              "restarts": 0.074}
    assert (gpt["goodput"], gpt["lost"]["usdPerDay"], gpt["lost"]["usdOverRun"]) == (0.9932, 18.02, None)


def test_the_prod_plan_text():
    lines = text(plan("--stack", "prod").stdout)
    assert lines == [
        ASSUMES.format(mbps="24,000", kind="PERSISTENT_2"),
        "  llama-70b: goodput 97.7% over its run of 38.4 days on 16 nodes (its model's tokens); 2,823 GPU-hours "
        "($19,423, $494 a day) not training: checkpoints 20.9 h (912.7 GiB = params x 14 B, 41 s each, every 30 "
        "min), 2.33 failures (MTBF 16.4 days) losing 35.0 min of work and 24.2 min restarting (10.4 min each), first "
        "start 9.7 min",
        "    best interval ~180 min (sqrt(2 x 41 s x 16.4 days) = 179.5 min): goodput 99.2%, +1.5 points, $12,773 "
        "less over the run",
        "  gpt-pretrain: goodput at most 99.3% per day of running on 2 nodes (no model tokens: no run time); 2.6 "
        "GPU-hours ($18.02) a day not training: checkpoints every 30 min of unknown size (set checkpoint.sizeGiB, or "
        "model), 0.0076 failures (MTBF 131.6 days) losing 7 s of work and 4 s restarting (9.7 min each), first start "
        "9.7 min",
    ]


def test_the_dev_plan_text_and_json():
    lines = text(plan("--stack", "dev").stdout)
    assert lines == [
        ASSUMES.format(mbps="240", kind="SCRATCH_2"),
        "  smoke: goodput at most 99.3% per day of running on 1 node (no model tokens: no run time); 0.2 GPU-hours "
        "($0.30) a day not training: checkpoints every 30 min of unknown size (set checkpoint.sizeGiB, or model), "
        "0.0038 failures (MTBF 263.2 days) losing 3 s of work and 2 s restarting (9.7 min each), first start 9.7 min",
    ]
    (smoke,) = json.loads(plan("--stack", "dev", "--json").stdout)["goodput"]["jobs"]
    assert (smoke["nodes"], smoke["gpus"], smoke["pricePerNodeHour"], smoke["goodput"]) == (1, 1, 1.861, 0.9932)


def test_the_section_follows_placement_and_adds_only_its_text():
    rec = recording("prod")
    report = plan_report.build_report(stack_config("prod"), rec, [])
    tree = plan_text.resource_tree(rec)
    full = plan_text.render(report, tree)
    start = full.index(f"\n\n{HEADER}\n")
    end = full.index("\n\n", start + 2)
    assert full[:start] + full[end:] == plan_text.render({k: v for k, v in report.items() if k != "goodput"}, tree)
    assert full.index("\nPlacement and admission (") < start < full.index("\nMonitoring (")


# -- hand-built jobs ---------------------------------------------------------------------------------


def test_a_70b_job_on_16_p5_every_30_min_against_every_240():
    every30, every240 = (section(overrides={"gpucluster:jobs": [big(m)]})["jobs"][0] for m in (30, 240))
    # Our image through the NAT gateway: 16 nodes share its 625 MB/s first, 39 MB/s each.
    assert every30["startupMinutes"] == startup.time_to_first_step(16, True, False).total_minutes == 11.9
    # 30 min: 2.3% of the run writing checkpoints, 15 min lost per failure.
    assert every30["minutes"] == {"training": 55295.8, "checkpointing": 1254.394, "lostWork": 35.021,
                                  "firstStart": 11.9, "restarts": 24.236}
    # 240 min: an eighth of the writing, eight times the lost work.
    assert every240["minutes"] == {"training": 55295.8, "checkpointing": 156.799, "lostWork": 280.165,
                                   "firstStart": 11.9, "restarts": 24.236}
    assert (every30["goodput"], every240["goodput"]) == (0.9766, 0.9915)
    assert every30["optimum"] == {"everyMinutes": 180, "exactMinutes": 179.5, "goodput": 0.9918, "points": 1.52,
                                  "usdPerDay": 322.18, "usdOverRun": 12772.59}
    assert every240["optimum"]["points"] == 0.03 and every240["optimum"]["usdOverRun"] == 260.89
    assert every30["warnings"] == every240["warnings"] == []  # within 5 points of the best


def test_the_best_interval_is_the_models_optimum():
    cfg = stack_config("prod", {"gpucluster:jobs": [big(30)], "gpucluster:teams": []})
    model = goodput.job_goodput(cfg, cfg.jobs[0])
    best = model.best_minutes
    assert best == 180 and model.goodput(best) >= max(model.goodput(best - 1), model.goodput(best + 1))
    assert math.sqrt(2 * model.write_minutes * model.mtbf_minutes) == pytest.approx(179.5, abs=0.05)
    assert model.mtbf_minutes == pytest.approx(1440 / (0.0038 * 16))


def test_a_long_interval_at_a_high_failure_rate_warns():
    s = section(overrides={"gpucluster:jobs": [big(1440)],
                           "gpucluster:observability": {"goodput": {"nodeFailuresPerDay": 0.02}}})
    j = s["jobs"][0]
    assert s["failuresSource"] is None and (j["mtbfHours"], j["expectedFailures"]) == (75.0, 12.2879)
    assert j["optimum"] == {"everyMinutes": 78, "exactMinutes": 78.3, "goodput": 0.9805, "points": 12.06,
                            "usdPerDay": 2549.47, "usdOverRun": 116123.6}
    assert s["warnings"] == ["job big: checkpoints every 1440 min cost 12.1 points of goodput against every 78 min "
                             "($116,124 over the run): set checkpoint.everyMinutes: 78"]
    lines = goodput.render(s)
    assert lines[2].startswith("  assumes 0.02 unexpected failures per node-day "
                               "(observability.goodput.nodeFailuresPerDay, the stack's), each losing")
    assert lines[3:] == [
        "  big: goodput 86.0% over its run of 38.4 days on 16 nodes (its model's tokens); 19,228 GPU-hours ($132,285, "
        "$2,962 a day) not training: checkpoints 26.1 min (912.7 GiB = params x 14 B, 41 s each, every 1440 min), "
        "12.3 failures (MTBF 3.1 days) losing 6.1 days of work and 2.1 h restarting (10.4 min each), first start "
        "11.9 min",
        "    best interval ~78 min (sqrt(2 x 41 s x 3.1 days) = 78.3 min): goodput 98.0%, +12.1 points, $116,124 less "
        "over the run",
        "  WARNING: job big: checkpoints every 1440 min cost 12.1 points of goodput against every 78 min ($116,124 "
        "over the run): set checkpoint.everyMinutes: 78",
    ]


def test_a_checkpoint_longer_than_its_interval_warns():
    # 980 GB at a 1,200 GiB SCRATCH_2's 240 MB/s: 68 min, more than the 30 between checkpoints.
    s = section(overrides={"gpucluster:jobs": [big(30)], "gpucluster:storage": SCRATCH})
    j = s["jobs"][0]
    assert j["checkpoint"]["writeMinutes"] == round(70e9 * 14 / 240e6 / 60, 2) == 68.06
    # The best interval, 1,795 min, is more than everyMinutes takes: 1440.
    assert (j["optimum"]["exactMinutes"], j["optimum"]["everyMinutes"], j["goodput"]) == (1795.5, 1440, 0.3056)
    assert s["warnings"] == [
        "job big: a checkpoint (912.7 GiB) takes 68.1 min to write at the file system's 240 MB/s, longer than its "
        "interval (checkpoint.everyMinutes 30): raise the interval or the FSx throughput (storage.fsx "
        "storageCapacityGiB, throughputPerTiB)",
        "job big: checkpoints every 30 min cost 61.9 points of goodput against every 1440 min ($1,778,601 over the "
        "run): set checkpoint.everyMinutes: 1440"]
    assert goodput.render(s)[4] == ("    best interval ~1440 min (sqrt(2 x 68.1 min x 16.4 days) = 1795.5 min, within "
                                    "everyMinutes' 1-1440): goodput 92.5%, +61.9 points, $1,778,601 less over the run")


def test_a_stated_size_wins_over_the_model_and_a_job_without_a_model_gets_an_optimum():
    s = section("dev", {"gpucluster:jobs": [{"name": "tune", "pool": "dev", "nodes": 2, "launcher": "torchrun",
                                             "image": "repo/train:1.0", "command": ["python", "train.py"],
                                             "checkpoint": {"everyMinutes": 60, "sizeGiB": 20}}]})
    (j,) = s["jobs"]
    # 20 GiB at 240 MB/s: 89.5 s; per day of running, two g6e.xlarge.
    assert j["checkpoint"]["sizeFrom"] == "sizeGiB" and j["checkpoint"]["writeMinutes"] == 1.49
    assert (j["runFrom"], j["upperBound"], j["lost"]["usdOverRun"]) == ("perDay", False, None)
    assert j["optimum"]["everyMinutes"] == round(math.sqrt(2 * 20 * 2**30 / 240e6 / 60 * 1440 / (0.0038 * 2)))
    assert j["optimum"]["usdOverRun"] is None and j["optimum"]["usdPerDay"] > 0


def test_no_failures_assumed_gives_no_best_interval():
    s = section(overrides={"gpucluster:jobs": [big(30)],
                           "gpucluster:observability": {"goodput": {"nodeFailuresPerDay": 0}}})
    j = s["jobs"][0]
    assert (j["expectedFailures"], j["mtbfHours"], j["optimum"]) == (0, None, None)
    assert j["minutes"]["lostWork"] == j["minutes"]["restarts"] == 0
    assert goodput.render(s)[3].endswith("every 30 min), no failures assumed, first start 11.9 min")


def test_a_stack_without_jobs_has_no_section():
    s = section(overrides={"gpucluster:jobs": []})
    assert s["jobs"] == [] and goodput.render(s) == [] and goodput.render(None) == []
