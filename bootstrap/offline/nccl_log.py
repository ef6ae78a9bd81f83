"""An nccl-tests all_reduce_perf log, parsed and judged: bus bandwidth against the instance's expectation, transport."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from components.core.hardware import catalog, nccl

TRANSPORT_OFI = "OFI/EFA"
TRANSPORT_SOCKET_FALLBACK = "Socket (fallback!)"
TRANSPORT_SOCKET = "Socket"  # expected on types without EFA: not a fallback there
TRANSPORT_UNKNOWN = "unknown"

# Launcher prefixes: kubectl logs --timestamps, then mpirun --tag-output or srun -l.
_PREFIX = re.compile(r"^(?:\d{4}-\d{2}-\d{2}T\S+\s+)?(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+:\s)?")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
# The network NCCL chose, strongest evidence first: "Using network <name>" (one per
# rank), then the channel lines "via NET/<name>/<dev>".
_USING_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_VIA_NET = re.compile(r"via NET/([^/]+)/")
# Weak evidence, only when neither of the above is in the log. NET/Socket is also
# printed while NCCL probes networks, so at this level OFI wins; WARN lines such as
# "NET/OFI aws-ofi-nccl initialization failed" are no evidence of OFI.
_OFI_INFO = re.compile(r"NCCL INFO NET/OFI ")
_SOCKET_INFO = re.compile(r"NCCL INFO NET/Socket")


@dataclass(frozen=True)
class Row:
    """One message size of the table."""

    size_bytes: int
    out_of_place_busbw: float
    in_place_busbw: float
    wrong: int | None  # out-of-place + in-place; None when the run had -c 0 (N/A)


@dataclass
class NcclLog:
    rows: list[Row] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None
    ranks: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    networks: set[str] = field(default_factory=set)  # from "Using network"
    channel_networks: set[str] = field(default_factory=set)  # from "via NET/..."
    ofi_info: bool = False
    socket_info: bool = False


def parse_log(text: str) -> NcclLog:
    """Everything nccl-report needs from an nccl-tests log."""
    log = NcclLog()
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw, count=1).strip()
        if not line:
            continue
        if line.startswith("#"):
            _parse_comment(line, log)
            continue
        row = _parse_row(line)
        if row is not None:
            log.rows.append(row)
            continue
        if match := _USING_NETWORK.search(line):
            log.networks.add(match.group(1))
        for name in _VIA_NET.findall(line):
            log.channel_networks.add(name)
        log.ofi_info |= bool(_OFI_INFO.search(line))
        log.socket_info |= bool(_SOCKET_INFO.search(line))
    return log


def _parse_comment(line: str, log: NcclLog) -> None:
    if match := _RANK.match(line):
        log.ranks.add(int(match.group(1)))
        log.hosts.add(match.group(2))
    elif match := _AVG.match(line):
        log.avg_busbw_gbps = float(match.group(1))
    elif match := _OUT_OF_BOUNDS.match(line):
        log.out_of_bounds = int(match.group(1))


def _parse_row(line: str) -> Row | None:
    """size count type redop [root] (time algbw busbw #wrong) x 2; root is absent before nccl-tests 2.10."""
    fields = line.split()
    if len(fields) == 12:
        fields.insert(4, "-1")
    if len(fields) != 13 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    try:  # time, algbw, busbw of out-of-place, then in-place: numbers in a table row
        numbers = [float(fields[i]) for i in (5, 6, 7, 9, 10, 11)]
    except ValueError:
        return None
    wrongs = [w for w in (_wrong(fields[8]), _wrong(fields[12])) if w is not None]
    return Row(int(fields[0]), numbers[2], numbers[5], sum(wrongs) if wrongs else None)


def _wrong(text: str) -> int | None:
    if text == "N/A":
        return None
    try:
        return int(text)
    except ValueError:
        return 1 if float(text) else 0  # old nccl-tests printed a max error, not a count


def transport_of(log: NcclLog, efa_expected: bool) -> str:
    """OFI/EFA, Socket (fallback!) where EFA is expected, Socket, or unknown."""
    for names in (log.networks, log.channel_networks):
        if names:
            if any("Socket" in name for name in names):  # some ranks at least fell back
                return TRANSPORT_SOCKET_FALLBACK if efa_expected else TRANSPORT_SOCKET
            if any("Libfabric" in name for name in names):
                return TRANSPORT_OFI
    if log.ofi_info:
        return TRANSPORT_OFI
    if log.socket_info:
        return TRANSPORT_SOCKET_FALLBACK if efa_expected else TRANSPORT_SOCKET
    return TRANSPORT_UNKNOWN


def judge(log: NcclLog, instance_type: str | None) -> dict:
    """The report as a JSON-ready dict; instance_type must be in the catalog (or None)."""
    itype = catalog.get(instance_type) if instance_type else None
    reasons: list[str] = []
    notes: list[str] = []

    peak_row, peak = None, None
    for row in log.rows:
        best = max(row.out_of_place_busbw, row.in_place_busbw)
        if peak is None or best > peak:
            peak_row, peak = row, best
    if peak_row is None:
        reasons.append("no nccl-tests data rows found: the test did not run, or this is not "
                       "all_reduce_perf output")

    wrong = sum(row.wrong or 0 for row in log.rows)
    if wrong:
        bad_rows = sum(1 for row in log.rows if row.wrong)
        reasons.append(f"#wrong: {wrong} wrong values in {bad_rows} message sizes (corrupt results: "
                       "suspect a GPU, NVLink or EFA device; run dcgmi diag on the nodes)")
    elif log.out_of_bounds:
        reasons.append(f"Out of bounds values: {log.out_of_bounds}")

    efa_expected = itype is None or itype.efa_supported
    transport = transport_of(log, efa_expected)
    if transport == TRANSPORT_SOCKET_FALLBACK:
        reasons.append("NCCL used TCP sockets (NET/Socket), not EFA: aws-ofi-nccl missing from the image, "
                       "or no EFA devices in the pod (vpc.amazonaws.com/efa resource)")
    elif transport == TRANSPORT_UNKNOWN:
        notes.append("transport unknown: run with NCCL_DEBUG=INFO to see NET/OFI or NET/Socket lines")
    if len(log.hosts) == 1:
        notes.append("single node: the run measures NVLink/PCIe only, not the network")

    ref = nccl.busbw_reference(itype.name) if itype else None
    threshold = None
    if itype is None:
        notes.append("no --instance-type: bus bandwidth not judged")
    elif ref is None:
        notes.append(f"{itype.name} has no EFA: no bus bandwidth reference")
    else:
        threshold = round(ref.gbps * nccl.BUSBW_PASS_FRACTION, 2)
        if ref.estimate:
            notes.append(f"expected bandwidth is an estimate ({ref.source})")
        if peak is not None and peak < threshold:
            reasons.append(f"peak bus bandwidth {peak:.1f} GB/s is below {nccl.BUSBW_PASS_FRACTION:.0%} of "
                           f"the {ref.gbps:g} GB/s expected for 2x {itype.name} at "
                           f"{nccl.format_bytes(ref.size_bytes)} ({threshold:.1f} GB/s)")
        largest = max((row.size_bytes for row in log.rows), default=None)
        if largest is not None and largest < ref.size_bytes:
            notes.append(f"the run stopped at {nccl.format_bytes(largest)}; the reference is measured at "
                         f"{nccl.format_bytes(ref.size_bytes)} (nccl-tests -e)")
        if len(log.hosts) > 2:
            notes.append(f"the reference is for 2 nodes; this run has {len(log.hosts)}")

    return {
        "instance_type": itype.name if itype else None,
        "rows": len(log.rows),
        "ranks": len(log.ranks) or None,
        "nodes": len(log.hosts) or None,
        "transport": transport,
        "peak_busbw_gbps": peak,
        "peak_size_bytes": peak_row.size_bytes if peak_row else None,
        "peak_size": nccl.format_bytes(peak_row.size_bytes) if peak_row else None,
        "avg_busbw_gbps": log.avg_busbw_gbps,
        "wrong": wrong,
        "expected_busbw_gbps": ref.gbps if ref else None,
        "expected_size": nccl.format_bytes(ref.size_bytes) if ref else None,
        "expected_is_estimate": ref.estimate if ref else None,
        "pass_threshold_gbps": threshold,
        "verdict": "FAIL" if reasons else "PASS",
        "reasons": reasons,
        "notes": notes,
    }
