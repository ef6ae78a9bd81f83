"""The README's Teams section says what the program does: its YAML is prod's teams, its plan excerpt is the prod
plan's Teams section, its status line is `status --team`'s, and the priority values are the classes'."""

from __future__ import annotations

import re

import yaml

from bootstrap.verbs.jobs import status
from components.core.config.text import stack_yaml
from components.core.kube import queueing
from tests import readme_blocks as rb
from tests.conftest import ROOT, plan

TITLE = "Teams: one cluster, shared fairly"
SECTION = rb.section(TITLE)


def blocks(language: str) -> list[str]:
    return [b.text.rstrip("\n") for b in rb.blocks() if b.lang == language and b.text in SECTION]


def test_the_teams_yaml_is_prod_s():
    (shown,) = blocks("yaml")
    prod = stack_yaml.parse((ROOT / "Pulumi.prod.yaml").read_text(), "gpucluster").config
    assert yaml.safe_load(shown)["gpucluster:teams"] == prod["gpucluster:teams"]


def test_the_plan_excerpt_is_the_prod_plan_s_teams_section():
    plain = [b for b in blocks("") if b.startswith("Teams (")]
    assert len(plain) == 1
    text = plan("--stack", "prod").stdout
    section = text[text.index("\nTeams (") + 1:].split("\n\n", 1)[0] + "\n"
    assert plain[0] == section.rstrip("\n")


def test_the_status_line_is_what_status_team_prints():
    line = status.render_spend({"team": "vision", "namespace": "vision", "budgetUsd": 150000.0,
                                "spend": {"usd": 12345.67, "gpuHours": 100.0, "since": "2026-12-01T00:00:00+00:00",
                                          "partial": None},
                                "usedShare": 0.0823, "leftUsd": 137654.33})
    assert line in blocks("")


def test_the_priority_values_are_the_classes():
    classes = {**queueing.PRIORITY_CLASSES, **queueing.TEAM_PRIORITY_CLASSES}
    stated = re.findall(r"`(gpucluster-\w+)`\s+\((\d+)\)", SECTION)
    assert {name: int(value) for name, value in stated} == {
        name: classes[name][0] for name in ("gpucluster-high", "gpucluster-training", "gpucluster-low")}
