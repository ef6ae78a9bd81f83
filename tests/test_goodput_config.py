"""The goodput keys: gpuPools[].preStepCheck and remediation, observability.goodput, jobs[].checkpoint."""

from __future__ import annotations

import pytest
import yaml

from components.core.config import ConfigError
from components.core.stack_config import parse as parse_stack
from tests.conftest import stack_config, stack_raw


def pools(stack: str, **changes) -> list[dict]:
    return [{**p, **changes} for p in yaml.safe_load(stack_raw(stack)["gpucluster:gpuPools"])]


def problems(stack: str, overrides: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_stack(stack_raw(stack, overrides), "gpucluster", stack)
    return [str(p) for p in info.value.problems]


def test_the_defaults_check_efa_pools_and_remediate_nothing():
    dev, prod = stack_config("dev"), stack_config("prod")
    assert [(p.name, p.pre_step_check, p.checks_before_start, p.remediation) for p in dev.gpu_pools] == [
        ("dev", True, False, "off")]  # g6e.xlarge has no EFA: nothing to judge
    assert [(p.name, p.checks_before_start, p.remediation) for p in prod.gpu_pools] == [("h100", True, "on")]
    goodput = dev.observability.goodput
    assert (goodput.no_progress_minutes, goodput.straggler_ratio, goodput.node_failures_per_day,
            goodput.record_retention_days) == (20, 0.8, 0.0038, 90)
    assert {(j.checkpoint.every_minutes, j.checkpoint.size_gib) for j in dev.jobs + prod.jobs} == {(30, None)}


def test_pre_step_check_off_turns_the_check_off():
    cfg = stack_config("prod", {"gpucluster:gpuPools": pools("prod", preStepCheck=False)})
    assert cfg.gpu_pools[0].checks_before_start is False


def test_remediation_needs_the_metrics_stack_and_says_so_with_every_other_problem():
    found = problems("prod", {"gpucluster:gpuPools": pools("prod", remediation="yes"),
                              "gpucluster:observability": {"retentionDays": 32,
                                                           "goodput": {"stragglerRatio": 1.5,
                                                                       "noProgressMinutes": 1,
                                                                       "recordRetentionDays": 0}}})
    assert found == [
        "gpucluster:gpuPools[0].remediation: got 'yes'; allowed: off, dry-run, on",
        "gpucluster:observability.goodput.noProgressMinutes: got 1; must be an integer from 2 to 1440",
        "gpucluster:observability.goodput.stragglerRatio: got 1.5; must be a number > 0 and <= 1",
        "gpucluster:observability.goodput.recordRetentionDays: got 0; must be an integer from 1 to 3650",
    ]
    off = problems("prod", {"gpucluster:gpuPools": pools("prod", remediation="dry-run"), "gpucluster:teams": [],
                            "gpucluster:observability": {"enabled": False}})
    assert off == ["gpucluster:gpuPools[0].remediation: got 'dry-run', but observability.enabled is false: the "
                   "controller acts on Prometheus' alerts; use off, or enable observability"]


def test_a_job_s_checkpoint_takes_an_interval_and_a_size():
    jobs = yaml.safe_load(stack_raw("prod")["gpucluster:jobs"])
    jobs[0]["checkpoint"] = {"everyMinutes": 120, "sizeGiB": 900}
    cfg = stack_config("prod", {"gpucluster:jobs": jobs})
    assert (cfg.jobs[0].checkpoint.every_minutes, cfg.jobs[0].checkpoint.size_gib) == (120, 900)
    jobs[0]["checkpoint"] = {"everyMinutes": 0, "sizeGiB": 0}
    assert problems("prod", {"gpucluster:jobs": jobs}) == [
        "gpucluster:jobs[0].checkpoint.everyMinutes: got 0; must be an integer from 1 to 1440",
        "gpucluster:jobs[0].checkpoint.sizeGiB: got 0; must be a number > 0",
    ]
