"""`python -m bootstrap <verb> ...`: the operator CLI (offline plan, state backend, preflight, teardown, tools)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VERBS = {
    "plan": ("bootstrap.verbs.plan", "offline plan of a stack under the mock runtime"),
    "diff": ("bootstrap.verbs.diff", "compare two `plan --json` outputs: a Markdown report of what changes"),
    "backend": ("bootstrap.verbs.backend", "create or verify the S3 state backend and KMS secrets key"),
    "preflight": ("bootstrap.verbs.preflight", "check the account against a stack before `pulumi up`"),
    "whoami": ("bootstrap.verbs.whoami", "the IAM ARN of your AWS credentials, for adminPrincipalArns"),
    "upgrade": ("bootstrap.verbs.upgrade", "resolve newer AMI and add-on pins for a stack, show and write them"),
    "destroy": ("bootstrap.verbs.destroy", "export FSx to S3, then destroy the stack; keeps the bucket"),
    "pause": ("bootstrap.verbs.pause", "hold the queue and let the GPU pools scale to zero"),
    "resume": ("bootstrap.verbs.pause:resume_main", "release the queue after a pause"),
    "size": ("bootstrap.verbs.size", "memory, time and cost of training a model (no cloud, no Pulumi)"),
    "nccl-report": ("bootstrap.verbs.nccl_report", "judge nccl-tests output: bus bandwidth, EFA or socket fallback"),
    "submit": ("bootstrap.verbs.jobs.submit", "start a job of the stack (startOnUp: false) or a job file, queued"),
    "status": ("bootstrap.verbs.jobs.status", "jobs with phase, nodes, elapsed time, cost so far and deadline"),
    "logs": ("bootstrap.verbs.jobs.logs", "a job's launcher or rank N, MPIJob and TrainJob alike (-f follows)"),
    "cancel": ("bootstrap.verbs.jobs.cancel", "delete a job and its pods; says what checkpoint the next run finds"),
    "doctor": ("bootstrap.verbs.jobs.doctor", "why a job waits or failed: each cause with evidence and fix; bundles"),
    "validate": ("bootstrap.verbs.jobs.validate", "is the cluster fit to train: one node, then two (GPUs, EFA, FSx)"),
}


def usage() -> str:
    lines = ["usage: python -m bootstrap <verb> [options]", "", "verbs:"]
    lines += [f"  {verb:<12} {text}" for verb, (_, text) in VERBS.items()]
    lines += ["", "python -m bootstrap <verb> --help for the verb's options"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        print(f"unknown verb {verb!r}\n\n{usage()}", file=sys.stderr)
        return 2
    import importlib

    module_name, _, function = VERBS[verb][0].partition(":")
    return getattr(importlib.import_module(module_name), function or "main")(rest)


def run(argv: list[str]) -> int:
    """main(), with the one exit-code rule of every verb (0 ok, 1 problems found, 2 could not run) and no
    traceback for anything a verb did not expect: a short message instead (GPUCLUSTER_DEBUG=1 shows it)."""
    import os

    try:
        return main(argv)
    except KeyboardInterrupt:
        print("gpucluster: interrupted", file=sys.stderr)
        return 2
    except SystemExit:
        raise
    except Exception as err:  # noqa: BLE001 (the CLI's last line of defence)
        if os.environ.get("GPUCLUSTER_DEBUG") == "1":
            raise
        where = err.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        place = f" at {Path(where.tb_frame.f_code.co_filename).name}:{where.tb_lineno}" if where else ""
        print(f"gpucluster: could not run {argv[0] if argv else ''}: {type(err).__name__}: {err}{place} "
              "(a bug: please report it; GPUCLUSTER_DEBUG=1 prints the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
