"""EFA interface layout, checked against AWS's describe-instance-types data shipped in moto."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import moto
import pytest

from components.core.hardware import catalog
from components.core.hardware.efa import PRIMARY, NetworkInterfaceSpec, efa_interface_count, interface_layout

MOTO_TYPES = Path(moto.__file__).parent / "ec2/resources/instance_types.json.gz"

# FACTS.md, "Instance types": MaximumEfaInterfaces per type.
EXPECTED_EFA_INTERFACES = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
    "p6-b300.48xlarge": 16,
    "g6e.48xlarge": 4,
    "g5.48xlarge": 1,
}


@pytest.fixture(scope="module")
def aws_types() -> dict:
    with gzip.open(MOTO_TYPES) as f:
        return json.load(f)


def check_against_aws(layout: list[NetworkInterfaceSpec], info: dict) -> None:
    """Each interface allowed on its card, device indexes in range, EFA total = AWS maximum."""
    network = info["NetworkInfo"]
    cards = {c["NetworkCardIndex"]: c for c in network["NetworkCards"]}
    for spec in layout:
        card = cards[spec.network_card_index]
        assert spec.interface_type in card["InterfaceTypes"], (spec, card["InterfaceTypes"])
        assert spec.device_index < card["MaximumNetworkInterfaces"], (spec, card)
    efa_total = sum(spec.is_efa for spec in layout)
    assert efa_total == network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)


@pytest.mark.parametrize("name", catalog.GPU_TYPES)
def test_layout_fits_aws_data(name, aws_types):
    check_against_aws(interface_layout(catalog.get(name)), aws_types[name])


@pytest.mark.parametrize("name", catalog.GPU_TYPES)
def test_layout_rules(name):
    layout = interface_layout(catalog.get(name))
    assert layout[0] == PRIMARY == NetworkInterfaceSpec(0, 0, "interface")
    assert all(spec.interface_type == "efa-only" for spec in layout[1:])
    efa_per_card = Counter(spec.network_card_index for spec in layout if spec.is_efa)
    assert max(efa_per_card.values(), default=0) <= 1
    slots = [(s.network_card_index, s.device_index) for s in layout]
    assert len(slots) == len(set(slots))
    for spec in layout[1:]:
        assert spec.device_index == (1 if spec.network_card_index == 0 else 0)


@pytest.mark.parametrize(("name", "expected"), EXPECTED_EFA_INTERFACES.items())
def test_efa_totals(name, expected):
    assert efa_interface_count(catalog.get(name)) == expected


def test_p5_has_card_0_efa_only_at_device_1_and_one_per_further_card():
    layout = interface_layout(catalog.get("p5.48xlarge"))
    assert layout[:3] == [NetworkInterfaceSpec(0, 0, "interface"), NetworkInterfaceSpec(0, 1, "efa-only"),
                          NetworkInterfaceSpec(1, 0, "efa-only")]
    assert [s.network_card_index for s in layout[2:]] == list(range(1, 32))


def test_p6_b300_keeps_card_0_ena_only():
    layout = interface_layout(catalog.get("p6-b300.48xlarge"))
    assert layout[0] == PRIMARY
    assert [(s.network_card_index, s.device_index) for s in layout[1:]] == [(c, 0) for c in range(1, 17)]


def test_single_card_g5_48xlarge_gets_one_efa_only_next_to_the_primary():
    assert interface_layout(catalog.get("g5.48xlarge")) == [PRIMARY, NetworkInterfaceSpec(0, 1, "efa-only")]


@pytest.mark.parametrize("name", ["g6e.xlarge", "g6.xlarge", "g5.xlarge"])
def test_types_without_efa_get_only_the_primary(name):
    assert interface_layout(catalog.get(name)) == [PRIMARY]
    assert efa_interface_count(catalog.get(name)) == 0


def test_efa_disabled_gives_only_the_primary():
    assert interface_layout(catalog.get("p5.48xlarge"), efa_enabled=False) == [PRIMARY]
