"""A sizing request (`bootstrap size`'s flags, or a job's model) and its validation: every problem at once."""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.core.config.values import parse_quantity
from components.core.hardware import catalog

ZERO_STAGES = (0, 1, 2, 3)


class SizingError(ValueError):
    """Every problem with a sizing request, reported at once."""

    def __init__(self, messages: list[str]):
        super().__init__("\n".join(messages))
        self.messages = list(messages)


@dataclass(frozen=True)
class SizingInput:
    """One sizing request. params/tokens take numbers or strings like "70B", "1.5T"."""

    params: float | str
    tokens: float | str | None = None
    gpus: int | None = None
    instance_type: str | None = None
    nodes: int | None = None
    zero_stage: int = 0
    tp: int = 1
    pp: int = 1
    mfu: float | None = None
    achieved_tflops: float | None = None
    recompute: bool = False
    price_overrides: dict[str, float] | None = None


def validate(inp: SizingInput) -> tuple[float, float | None, catalog.InstanceType | None]:
    """Parsed params, tokens and the catalog entry; SizingError with every problem otherwise."""
    errors: list[str] = []

    params = _parse_positive("--params", inp.params, errors)
    tokens = None if inp.tokens is None else _parse_positive("--tokens", inp.tokens, errors)

    if inp.zero_stage not in ZERO_STAGES or isinstance(inp.zero_stage, bool):
        errors.append(f"--zero-stage: got {inp.zero_stage}; allowed {', '.join(map(str, ZERO_STAGES))}")
    for flag, value in (("--tp", inp.tp), ("--pp", inp.pp)):
        if not _is_positive_int(value):
            errors.append(f"{flag}: got {value}; must be an integer >= 1")

    if inp.mfu is not None and inp.achieved_tflops is not None:
        errors.append("--mfu and --achieved-tflops are mutually exclusive; give one")
    if inp.mfu is not None and not (0 < inp.mfu <= 1):
        errors.append(f"--mfu: got {inp.mfu:g}; must be > 0 and <= 1")
    if inp.achieved_tflops is not None and not inp.achieved_tflops > 0:
        errors.append(f"--achieved-tflops: got {inp.achieved_tflops:g}; must be > 0")

    itype = None
    if inp.instance_type is not None:
        try:
            itype = catalog.get(inp.instance_type)
        except KeyError:
            errors.append(f"--instance-type: got {inp.instance_type}; known GPU types: "
                          f"{', '.join(catalog.GPU_TYPES)}")
        else:
            if not itype.is_gpu:
                errors.append(f"--instance-type: got {inp.instance_type}, which has no GPUs; "
                              f"known GPU types: {', '.join(catalog.GPU_TYPES)}")
                itype = None

    if inp.gpus is not None and not _is_positive_int(inp.gpus):
        errors.append(f"--gpus: got {inp.gpus}; must be an integer >= 1")
    if inp.nodes is not None and not _is_positive_int(inp.nodes):
        errors.append(f"--nodes: got {inp.nodes}; must be an integer >= 1")

    if inp.gpus is not None and inp.nodes is not None:
        errors.append("--gpus and --nodes are mutually exclusive: give --gpus N, "
                      "or --instance-type T --nodes K")
    elif inp.gpus is None and inp.nodes is None:
        errors.append("give the GPU count: --gpus N, or --instance-type T --nodes K")
    elif inp.nodes is not None and inp.instance_type is None:
        errors.append("--nodes needs --instance-type (GPUs per node come from the type)")

    if inp.mfu is not None and inp.instance_type is None:
        errors.append("--mfu needs --instance-type (the peak TFLOP/s comes from the GPU model); "
                      "or give --achieved-tflops")

    gpus, label = _gpu_count(inp, itype, errors)
    mp = inp.tp * inp.pp if _is_positive_int(inp.tp) and _is_positive_int(inp.pp) else None
    if gpus is not None and mp is not None and gpus % mp:
        errors.append(f"--tp x --pp ({mp}) must divide {label}")

    if errors:
        raise SizingError(errors)
    return params, tokens, itype


def _gpu_count(inp: SizingInput, itype: catalog.InstanceType | None,
               errors: list[str]) -> tuple[int | None, str]:
    """Total GPUs and how to name that count in a message, when the inputs determine it."""
    if inp.gpus is not None and inp.nodes is not None:
        return None, ""
    if _is_positive_int(inp.gpus):
        if itype is not None and inp.gpus % itype.gpu_count:
            errors.append(f"--gpus: got {inp.gpus}; {itype.name} has {itype.gpu_count} GPUs per node, "
                          "so give a multiple of that (or --nodes)")
            return None, ""
        return inp.gpus, f"--gpus ({inp.gpus})"
    if _is_positive_int(inp.nodes) and itype is not None:
        gpus = inp.nodes * itype.gpu_count
        return gpus, f"the GPU count ({gpus} = --nodes {inp.nodes} x {itype.gpu_count} GPUs of {itype.name})"
    return None, ""


def _parse_positive(flag: str, value: float | str, errors: list[str]) -> float:
    try:
        number = parse_quantity(value)
    except ValueError:
        errors.append(f"{flag}: got {value!r}; expected a number such as 7e9, 70B, 1.5T, 500M "
                      "(suffixes K, M, B, T)")
        return math.nan
    if not (number > 0 and math.isfinite(number)):
        errors.append(f"{flag}: got {value!r}; must be > 0")
    return number


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
