"""`python -m bootstrap size`: does a model fit, on how many nodes, how long and at what cost.

    size --params P [--tokens T] [--gpus N | --instance-type T --nodes K]
         [--zero-stage 0-3] [--tp X] [--pp Y] [--mfu F | --achieved-tflops F]
         [--recompute] [--ps-replicas R --ps-instance-type C] [--json]

With --ps-replicas, also the parameter servers of a `launcher: ps` job (one
worker per node): the memory each holds, the bytes each moves per step.

Exit 0 with a report (or one JSON object with --json); exit 2 with the
problems on stderr when the input is bad.
"""

from __future__ import annotations

import argparse
import json
import sys

from components.core.hardware import catalog
from components.core.planning import ps_sizing
from components.core.planning.sizing import ACTIVATION_HEADROOM, SizingError, SizingInput, SizingResult, size


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # usage errors (2) and --help (0) as a return code
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        result = size(SizingInput(
            params=args.params,
            tokens=args.tokens,
            gpus=args.gpus,
            instance_type=args.instance_type,
            nodes=args.nodes,
            zero_stage=args.zero_stage,
            tp=args.tp,
            pp=args.pp,
            mfu=args.mfu,
            achieved_tflops=args.achieved_tflops,
            recompute=args.recompute,
        ))
    except SizingError as err:
        problems = err.messages + _ps_problems(args)
        for message in problems:
            print(f"size: error: {message}", file=sys.stderr)
        return 2
    problems = _ps_problems(args)
    if args.ps_replicas is not None and not result.nodes:
        problems.append("--ps-replicas needs the workers: --instance-type with --nodes (one worker per node)")
    if problems:
        for message in problems:
            print(f"size: error: {message}", file=sys.stderr)
        return 2
    ps = None
    if args.ps_replicas is not None:
        ps = ps_sizing.size_ps(result.params, args.ps_replicas, result.nodes, args.ps_instance_type)
    if args.json:
        out = result.to_dict()
        if ps is not None:
            out["parameterServers"] = ps.to_dict()
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(render(result) + (f"\nPS:        {ps_sizing.render(ps)}" if ps is not None else ""))
    return 0


def _ps_problems(args: argparse.Namespace) -> list[str]:
    if args.ps_replicas is None:
        return ["--ps-instance-type needs --ps-replicas"] if args.ps_instance_type else []
    problems = []
    if args.ps_replicas < 1:
        problems.append(f"--ps-replicas: got {args.ps_replicas}; must be at least 1")
    if args.ps_instance_type not in catalog.CPU_TYPES:
        problems.append(f"--ps-instance-type: got {args.ps_instance_type!r}; allowed: "
                        f"{catalog.by_family(catalog.CPU_TYPES)}")
    return problems


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bootstrap size",
        description="Model-state memory per GPU, minimum nodes, training time and cost "
                    "(mixed-precision Adam, ZeRO stages 0-3, tensor/pipeline parallelism).",
    )
    # Numbers arrive as strings so "70B" parses and every bad value is reported together.
    parser.add_argument("--params", required=True, help="model parameters: 7e9, 70B, 1.5T")
    parser.add_argument("--tokens", help="training tokens: 1e12, 300B, 2T")
    parser.add_argument("--gpus", type=int, help="total GPUs (alternative to --nodes)")
    parser.add_argument("--instance-type", help="GPU instance type from the catalog, e.g. p5.48xlarge")
    parser.add_argument("--nodes", type=int, help="nodes of --instance-type")
    parser.add_argument("--zero-stage", type=int, default=0, help="ZeRO stage 0-3 (default 0)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree (default 1)")
    parser.add_argument("--mfu", type=float, help="model FLOPs utilization, 0-1, of the BF16 peak")
    parser.add_argument("--achieved-tflops", type=float, help="achieved TFLOP/s per GPU")
    parser.add_argument("--recompute", action="store_true", help="activation recomputation (8 x P FLOPs/token)")
    parser.add_argument("--ps-replicas", type=int, help="parameter servers of a `launcher: ps` job")
    parser.add_argument("--ps-instance-type", help="their CPU instance type (a cpuPools type), e.g. m7i.8xlarge")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def render(r: SizingResult) -> str:
    """The human report."""
    lines = [f"Model:     {_si(r.params)} parameters" + (f", {_si(r.tokens)} tokens" if r.tokens else "")]
    if r.instance_type:
        lines.append(f"Cluster:   {r.nodes} x {r.instance_type} = {r.gpus} x {r.gpu_model}")
    else:
        lines.append(f"Cluster:   {r.gpus} GPUs (type not given)")
    lines.append(f"Layout:    tp={r.tp} pp={r.pp} data-parallel={r.data_parallel}, ZeRO stage {r.zero_stage}")

    if r.gpu_memory_gb is None:
        lines.append(f"Memory:    model state {r.model_state_gb_per_gpu:.1f} GB per GPU")
        lines.append("Fits:      unknown (no --instance-type)")
    else:
        lines.append(f"Memory:    model state {r.model_state_gb_per_gpu:.1f} GB per GPU of "
                     f"{r.gpu_memory_gb:.1f} GB; limit {r.model_state_limit_gb:.1f} GB "
                     f"({1 - ACTIVATION_HEADROOM:.0%}, the rest for activations); "
                     f"headroom {r.headroom_gb:.1f} GB")
        lines.append("Fits:      " + _fit_line(r))

    if r.training_days is not None:
        lines.append(f"Compute:   {r.total_flops:.3g} FLOPs at {r.achieved_tflops_per_gpu:.0f} TFLOP/s per GPU")
        lines.append(f"Time:      {r.training_days:.1f} days, {r.gpu_hours:,.0f} GPU-hours")
    else:
        lines.append("Time:      not estimated")
    if r.cost_usd is not None:
        lines.append(f"Cost:      ${r.cost_usd:,.0f} on demand ({r.node_hours:,.0f} node-hours at "
                     f"${r.price_usd_per_hour:.2f}/h)")
    else:
        lines.append("Cost:      not estimated")
    lines += [f"Note:      {note}" for note in r.notes]
    return "\n".join(lines)


def _fit_line(r: SizingResult) -> str:
    if r.fits:
        return f"yes (the minimum is {r.min_nodes} node{'s' if r.min_nodes != 1 else ''})"
    if r.min_nodes is None:
        return "no, on no node count with this tp/pp/ZeRO stage"
    return f"no; needs at least {r.min_nodes} nodes ({r.min_gpus} GPUs) with this tp/pp/ZeRO stage"


def _si(value: float) -> str:
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"
