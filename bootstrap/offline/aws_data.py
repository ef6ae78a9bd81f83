"""AWS's zone and instance-offering data as moto ships it, read as files (moto itself is not imported).

The offline plan answers the program's zone and offering lookups from this
data: importing moto's EC2 models for it would cost half a second a plan.
"""

from __future__ import annotations

import ast
import functools
import gzip
import importlib.util
import json
from pathlib import Path


class PlanDataError(Exception):
    """The offline plan has no AWS data (zones, offerings) for what the stack asks."""


def moto_data_dir() -> Path:
    """moto's package folder, found without importing moto (its EC2 models take ~0.5 s to import)."""
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        raise PlanDataError("the offline plan reads AWS's zone and offering data from moto, which is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def _moto_zone_table() -> dict[str, list[tuple[str, str]]]:
    """Every region's (zone name, zone ID) of type availability-zone, read from moto's source as data.

    moto keeps them as `Zone(region_name=..., name=..., zone_id=..., zone_type=...)`
    literals in ec2/models/availability_zones_and_regions.py; reading that file
    (rather than importing it, which imports all of moto's EC2) costs milliseconds.
    """
    source = moto_data_dir() / "ec2" / "models" / "availability_zones_and_regions.py"
    table: dict[str, list[tuple[str, str]]] = {}
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Zone":
            fields = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            if {"region_name", "name", "zone_id"} <= set(fields) and (
                    fields.get("zone_type", "availability-zone") == "availability-zone"):
                table.setdefault(fields["region_name"], []).append((fields["name"], fields["zone_id"]))
    if not table:
        raise PlanDataError(f"{source}: no Zone(...) entries found; moto's zone data has moved")
    return table


def _regular_zones(region: str) -> list[tuple[str, str]]:
    """moto's mapping for a region its table leaves out: zones a-c, IDs <shorthand>-az1..3 (us-gov-west-1: usgw1)."""
    parts = region.split("-")
    shorthand = "usg" if region.startswith("us-gov") else parts[0]
    for cardinal in ("north", "south", "central", "east", "west"):
        if cardinal in region:
            shorthand += cardinal[0]
    shorthand += parts[-1]
    return [(f"{region}{letter}", f"{shorthand}-az{i}") for i, letter in enumerate("abc", start=1)]


def _offerings_path(region: str) -> Path:
    return moto_data_dir() / "ec2/resources/instance_type_offerings/availability-zone" / f"{region}.json.gz"


def moto_zones(region: str) -> list[tuple[str, str]]:
    """(name, zone ID) of the region's availability zones, as moto ships them (one account's mapping)."""
    table = _moto_zone_table()
    if region in table:
        return table[region]
    if _offerings_path(region).exists():
        return _regular_zones(region)
    # moto makes up zones a-c for every other region; without offerings the plan cannot use them.
    raise PlanDataError(f"the offline plan has no instance-type offerings for {region} (moto's data lacks it)")


def moto_offerings(region: str) -> dict[str, list[str]]:
    """AWS's instance-type offerings per zone name as shipped in moto."""
    path = _offerings_path(region)
    if not path.exists():
        raise PlanDataError(f"the offline plan has no instance-type offerings for {region} (moto's data lacks it)")
    by_az: dict[str, list[str]] = {}
    with gzip.open(path) as f:
        rows = json.load(f)
    for row in rows:
        by_az.setdefault(row["Location"], []).append(row["InstanceType"])
    return by_az
