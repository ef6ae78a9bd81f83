"""Training log lines as numbers: the loss curve, step times and checkpoint writes (pure).

Formats read (each a line the framework prints, found anywhere in the line so launcher
prefixes such as `[1,0]<stdout>:` or `[rank0]:` do not matter):
- Megatron-LM megatron/training/training.py training_log: " iteration  100/ 5000 | ... |
  elapsed time per iteration (ms): 1234.5 | ... | lm loss: 2.345E+00 | ... | number of nan
  iterations:   0 |"; megatron/core/timers.py: "    save-checkpoint ....: (min, max)" in ms
  under "(min, max) time across ranks (ms):"; the arguments dump "  save_interval ..... 100".
- torchtitan torchtitan/train.py and components/checkpoint.py: "step: 10  loss:  7.9 ...",
  "Finished saving the checkpoint (or staging if async is enabled)in 5.53 seconds."
- Hugging Face Trainer's log dict "{'loss': 2.31, 'grad_norm': ..., 'epoch': 0.1}", and the
  common "loss=2.31" / "loss: 2.31", "step_time: 1.2s", "checkpoint saved in 12.3 s".
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime

LOSS = re.compile(r"(?:\blm loss|['\"]?\bloss['\"]?)\s*[:=]?\s*(nan|[-+]?inf(?:inity)?|[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
                  r"(?![\w.])", re.I)
NAN_ITERATIONS = re.compile(r"number of nan iterations:\s*(\d+)")
STEP = re.compile(r"\biteration\s+(\d+)\s*/|\b(?:step|iter|iteration)\s*[:=]?\s*(\d+)", re.I)
STEP_MS = re.compile(r"elapsed time per iteration \(ms\):\s*([\d.]+)")
STEP_TIME = re.compile(r"\bstep[_ ]time\s*[:=]?\s*([\d.]+)\s*(ms|s)?\b", re.I)
SAVE_TIMER = re.compile(r"^\s*save-checkpoint\s*\.*:\s*\(?([\d.]+)(?:,\s*([\d.]+)\))?")
SAVE_TITAN = re.compile(r"Finished saving the checkpoint.*?in\s+([\d.]+)\s+seconds")
SAVE_GENERIC = re.compile(r"\b(?:sav\w*|wr[io]te\w*|written)\b.*?checkpoint.*?\b(?:in|took)\s+([\d.]+)\s*"
                          r"(ms|s|sec|secs|seconds)\b|checkpoint\b.*?\b(?:saved|written)\b.*?\b(?:in|took)\s+"
                          r"([\d.]+)\s*(ms|s|sec|secs|seconds)\b", re.I)
SAVE_INTERVAL = re.compile(r"^\s*save_interval\s*\.+\s*(\d+)\s*$")
TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?")


@dataclass(frozen=True)
class Point:
    step: int | None
    value: float
    line: str


@dataclass(frozen=True)
class Save:
    seconds: float
    step: int | None
    line: str


@dataclass
class Training:
    losses: list[Point] = field(default_factory=list)
    nan_lines: list[str] = field(default_factory=list)  # a NaN/inf loss, or Megatron's nan iterations > 0
    step_seconds: list[tuple[float, str]] = field(default_factory=list)
    saves: list[Save] = field(default_factory=list)
    save_interval: int | None = None
    stamped_steps: list[tuple[int, datetime, bool]] = field(default_factory=list)  # step, time, a save before it


def _seconds(value: str, unit: str | None) -> float:
    return float(value) / 1000 if (unit or "").lower() == "ms" else float(value)


def _stamp(line: str) -> datetime | None:
    match = TIMESTAMP.search(line)
    if not match:
        return None
    day, clock, fraction = match.groups()
    try:
        return datetime.fromisoformat(f"{day}T{clock}" + (f".{fraction[:6]}" if fraction else ""))
    except ValueError:
        return None


def parse(text: str) -> Training:
    out = Training()
    step: int | None = None
    saved_since_step = False
    for line in text.splitlines():
        if match := STEP.search(line):
            step = int(match.group(1) or match.group(2))
        if match := SAVE_INTERVAL.match(line):
            out.save_interval = int(match.group(1))
            continue
        if save := _save(line, step):
            out.saves.append(save)
            saved_since_step = True
            continue
        if match := STEP_MS.search(line):
            out.step_seconds.append((float(match.group(1)) / 1000, line))
        elif match := STEP_TIME.search(line):
            out.step_seconds.append((_seconds(match.group(1), match.group(2) or "s"), line))
        if (match := NAN_ITERATIONS.search(line)) and int(match.group(1)) > 0:
            out.nan_lines.append(line)
        if match := LOSS.search(line):
            value = float(match.group(1))
            out.losses.append(Point(step, value, line))
            if not math.isfinite(value) and line not in out.nan_lines:
                out.nan_lines.append(line)
            if step is not None and (stamp := _stamp(line)):
                out.stamped_steps.append((step, stamp, saved_since_step))
                saved_since_step = False
    return out


def _save(line: str, step: int | None) -> Save | None:
    if match := SAVE_TIMER.match(line):
        return Save(float(match.group(2) or match.group(1)) / 1000, step, line)
    if match := SAVE_TITAN.search(line):
        return Save(float(match.group(1)), step, line)
    if match := SAVE_GENERIC.search(line):
        value, unit = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        return Save(_seconds(value, unit), step, line)
    return None


def loss_spike(points: list[Point], window: int = 5, min_history: int = 5,
               ratio: float = 2.0, min_jump: float = 0.5) -> tuple[Point, float] | None:
    """The first loss at least `ratio` x the median of the previous `window` points (and `min_jump` above it)."""
    finite = [p for p in points if math.isfinite(p.value)]
    for i in range(min_history, len(finite)):
        median = statistics.median(p.value for p in finite[max(0, i - window):i])
        if median > 0 and finite[i].value >= ratio * median and finite[i].value - median >= min_jump:
            return finite[i], median
    return None


def step_time(training: Training) -> float | None:
    """Median seconds per optimizer step: printed step times, else timestamps of loss lines without a save between."""
    if training.step_seconds:
        return statistics.median(s for s, _ in training.step_seconds)
    rates = [(t2 - t1).total_seconds() / (s2 - s1)
             for (s1, t1, _), (s2, t2, saved) in zip(training.stamped_steps, training.stamped_steps[1:])
             if s2 > s1 and not saved]
    return statistics.median(rates) if rates else None


def steps_between_saves(training: Training) -> int | None:
    steps = [s.step for s in training.saves if s.step is not None]
    gaps = [b - a for a, b in zip(steps, steps[1:]) if b > a]
    if gaps:
        return int(statistics.median(gaps))
    if training.save_interval:
        return training.save_interval
    return steps[0] if steps and steps[0] > 0 else None


def checkpoint_share(training: Training) -> tuple[float, Save, float, int] | None:
    """(share of wall time spent saving, the slowest save, seconds per step, steps between saves)."""
    if not training.saves:
        return None
    per_step, between = step_time(training), steps_between_saves(training)
    if not per_step or not between:
        return None
    save_seconds = statistics.median(s.seconds for s in training.saves)
    share = save_seconds / (save_seconds + between * per_step)
    return share, max(training.saves, key=lambda s: s.seconds), per_step, between
