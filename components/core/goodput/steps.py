"""The lines a training script prints for the accounting, and their parser (standard library only: this file ships
into the cluster).

Rank 0 prints, after each optimizer step and after each complete checkpoint:

    gpucluster-step step=<int> time=<unix seconds, 3 decimals>
    gpucluster-checkpoint step=<int> start=<unix seconds> end=<unix seconds>

In a script of your own, that is two lines (examples/train_synthetic.py does it):

    print(f"gpucluster-step step={step} time={time.time():.3f}", flush=True)
    print(f"gpucluster-checkpoint step={step} start={began:.3f} end={time.time():.3f}", flush=True)

The parser finds them anywhere in a line, so whatever is put in front is fine: kubectl's --timestamps, torchrun's
"[rank0]:" or "[default0]:", mpirun's "[1,0]<stdout>:" (--tag-output). Other lines, and lines whose numbers do
not parse or whose time is not Unix seconds (time.perf_counter() instead of time.time()), are skipped.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable

STEP = "gpucluster-step"
CHECKPOINT = "gpucluster-checkpoint"
_NUMBER = r"(\d+(?:\.\d+)?)"
_STEP = re.compile(rf"{STEP} step=(\d+) time={_NUMBER}(?!\S)")
_CHECKPOINT = re.compile(rf"{CHECKPOINT} step=(\d+) start={_NUMBER} end={_NUMBER}(?!\S)")
# Unix seconds from 2001-09-09 to 5138: a monotonic clock's seconds since boot are far below.
_EARLIEST, _LATEST = 1e9, 1e11


def step_line(step: int, at: float) -> str:
    return f"{STEP} step={int(step)} time={at:.3f}"


def checkpoint_line(step: int, start: float, end: float) -> str:
    return f"{CHECKPOINT} step={int(step)} start={start:.3f} end={end:.3f}"


def _unix(text: str) -> float | None:
    value = float(text)
    return round(value, 3) if _EARLIEST <= value < _LATEST else None


def parse(lines: Iterable[str] | str) -> list[dict]:
    """{"type": "step", "step", "at"} and {"type": "checkpoint", "step", "start", "end"}, in the order printed."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    found: list[dict] = []
    for line in lines:
        if (match := _STEP.search(line)) is not None:
            if (at := _unix(match[2])) is not None:
                found.append({"type": "step", "step": int(match[1]), "at": at})
        elif (match := _CHECKPOINT.search(line)) is not None:
            start, end = _unix(match[2]), _unix(match[3])
            if start is not None and end is not None and end >= start:
                found.append({"type": "checkpoint", "step": int(match[1]), "start": start, "end": end})
    return found


def keep(found: list[dict], failures: Iterable[float], slack: float) -> list[dict]:
    """The step lines (sorted by time) an account needs: the first, the last, the lowest, the highest, each side
    of a step going back, and around each failure the last line before it (within `slack` after it: Kubernetes
    times are whole seconds), the first after it and the first past the step reached before it."""
    if len(found) <= 2:
        return found
    steps = [s["step"] for s in found]
    keep = {0, len(found) - 1, steps.index(min(steps)), steps.index(max(steps))}
    keep |= {j for i in range(len(found) - 1) if steps[i + 1] < steps[i] for j in (i, i + 1)}
    times, highest = [s["at"] for s in found], list(itertools.accumulate(steps, max))
    for at in failures:
        n = bisect.bisect_left(times, at + slack)  # the lines before the failure
        keep |= {n - 1} if n else set()
        if n < len(found):
            reached = highest[n - 1] if n else -1
            keep |= {n, next((i for i in range(n, len(found)) if steps[i] >= reached), n)}
    return [found[i] for i in sorted(keep)]
