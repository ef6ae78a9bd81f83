"""In what order the ClusterQueue starts the stack's jobs on each pool (pure, for the plan).

A simple simulation of Kueue's BestEffortFIFO admission against each pool's
quota (maxNodes): workloads in priority order, then in the order the stack
lists them; whatever fits the free nodes is admitted, whatever does not
waits, without blocking smaller ones behind it; when a running job ends,
its nodes go back and admission is tried again. A job ends at its run
time estimate (the model sizing), else its deadline; a job with neither
is assumed to end before those started after it, so the order stays
defined.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Workload:
    name: str
    pool: str
    nodes: int
    priority: int
    hours: float | None  # expected run time; None: unknown


@dataclass
class Start:
    name: str
    order: int  # 1-based position in its pool's start sequence
    after: list[str] = field(default_factory=list)  # jobs that must end before it can start


def simulate(workloads: list[Workload], capacity: dict[str, int]) -> dict[str, Start]:
    """Start order per pool; a workload larger than its pool never starts (config rejects those)."""
    pending = sorted(range(len(workloads)), key=lambda i: (-workloads[i].priority, i))
    free = dict(capacity)
    clock = 0.0
    running: list[tuple[float, int, int]] = []  # (end time, start sequence, index)
    ended: dict[str, list[str]] = {pool: [] for pool in capacity}
    starts: dict[str, Start] = {}
    sequence = 0
    counters = dict.fromkeys(capacity, 0)
    while pending:
        for i in list(pending):
            w = workloads[i]
            if w.nodes <= free.get(w.pool, 0):
                free[w.pool] -= w.nodes
                counters[w.pool] += 1
                starts[w.name] = Start(w.name, counters[w.pool], list(ended[w.pool]))
                # Unknown run times end in start order, after every known one started with them.
                end = clock + w.hours if w.hours is not None else float("inf")
                running.append((end, sequence, i))
                sequence += 1
                pending.remove(i)
        if not pending or not running:
            break
        running.sort()
        end, _, i = running.pop(0)
        w = workloads[i]
        clock = clock if end == float("inf") else end
        free[w.pool] += w.nodes
        ended[w.pool].append(w.name)
    return starts
