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
    "report": ("bootstrap.verbs.jobs.report", "where a job's paid GPU-hours went: by phase, goodput, cost per step"),
    "cancel": ("bootstrap.verbs.jobs.cancel", "delete a job and its pods; says what checkpoint the next run finds"),
    "doctor": ("bootstrap.verbs.jobs.doctor", "why a job waits or failed: each cause with evidence and fix; bundles"),
    "validate": ("bootstrap.verbs.jobs.validate", "is the cluster fit to train: one node, then two (GPUs, EFA, FSx)"),
    "fabric-test": ("bootstrap.verbs.jobs.fabric_test", "the fabric test in each network domain of a pool, and across"),
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


# What a shell reports for a tool its closed pipe ended (`seq 1 1000000 | head -1`: 128 + SIGPIPE).
CLOSED_PIPE = 141


def run(argv: list[str]) -> int:
    """main(), with the one exit-code rule of every verb (0 ok, 1 problems found, 2 could not run) and no
    traceback for anything a verb did not expect: a short message instead (GPUCLUSTER_DEBUG=1 shows it).

    A reader that goes away (`plan | head -1`) ends it quietly with CLOSED_PIPE, as it ends cat or seq: it is
    neither a problem found nor a failure to run. A file, device or network error a verb did not catch is
    one line and 2 (could not run), not a bug report."""
    import os

    verb = argv[0] if argv else ""
    debug = os.environ.get("GPUCLUSTER_DEBUG") == "1"
    try:
        code = main(argv)
    except BrokenPipeError:  # the network libraries wrap their own: this is our stdout (or stderr)
        _silence_stdout()
        return CLOSED_PIPE
    except KeyboardInterrupt:
        _say("gpucluster: interrupted")
        return 2
    except SystemExit:
        if not _flushed():  # `--help | head -1`
            return CLOSED_PIPE
        raise
    except OSError as err:
        if debug:
            raise
        where = f"{err.filename}: " if err.filename else ""
        _say(f"gpucluster: could not run {verb}: {where}{err.strerror or err} (GPUCLUSTER_DEBUG=1 prints the "
             "traceback)")
        return 2
    except Exception as err:  # noqa: BLE001 (the CLI's last line of defence)
        if debug:
            raise
        where = err.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        place = f" at {Path(where.tb_frame.f_code.co_filename).name}:{where.tb_lineno}" if where else ""
        _say(f"gpucluster: could not run {verb}: {type(err).__name__}: {err}{place} "
             "(a bug: please report it; GPUCLUSTER_DEBUG=1 prints the traceback)")
        return 2
    # Flushed here, so a closed pipe shows inside run() and not in the interpreter's last flush.
    return code if _flushed() else CLOSED_PIPE


def _flushed() -> bool:
    """Flush stdout; False, with stdout silenced, when its reader has gone."""
    try:
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        _silence_stdout()
        return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null, as the Python docs' "Note on SIGPIPE" says: what is still buffered would
    otherwise fail again at exit, printed as "Exception ignored ... BrokenPipeError"."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor behind stdout (a test's capture)
        pass


def _say(message: str) -> None:
    """A line on stderr, unless stderr is the closed pipe too (`2>&1 | head`)."""
    try:
        print(message, file=sys.stderr)
    except BrokenPipeError:
        pass


def end(code: int) -> None:
    """Exit with `code`; CLOSED_PIPE the way cat or seq end when their reader goes: killed by SIGPIPE (the
    shell shows 141, make says "Broken pipe"), with nothing printed."""
    import os
    import signal

    if code == CLOSED_PIPE and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    sys.exit(code)


if __name__ == "__main__":
    end(run(sys.argv[1:]))
