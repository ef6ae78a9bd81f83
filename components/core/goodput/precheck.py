"""The pre-step check, run: before a multi-node job's first step, every node's EFA devices and GPUs, then one
all_reduce across exactly the job's GPUs, judged as nccl-report judges nccl-tests (precheck_verdict.py; the
rendering that wraps the job's command in it is placement/prestep.py). Ships into the job's own image: the
standard library, torch only inside TorchComm.

    python3 -m gpucluster_goodput.precheck torchrun        each TrainJob node, before the job's torchrun
    python3 -m gpucluster_goodput.precheck mpirun ARGV...  the MPIJob launcher: ARGV (mpirun ... rank) first
    python3 -m gpucluster_goodput.precheck rank            one process per GPU, under torchrun or mpirun

A driver (torchrun, mpirun) starts the ranks, takes rank 0's verdict, prints one line per node, writes it as
the container's termination message (names.PRE_STEP_MESSAGE_KEY) and exits names.PRE_STEP_EXIT_CODE when a
node failed or the check could not finish, 0 otherwise. The ranks always exit 0 after a verdict: torchrun
turns any failed worker into its own exit code 1 (torch.distributed.elastic ChildFailedError) and a failed
rank would leave its peers hanging in a collective. Order, so that no node's fault hangs the others:
1. each node's local rank 0 checks itself (local_check); all ranks gather the results over gloo (TCP on the
   pod network, which works without EFA); a node failing it: no NCCL at all;
2. all_reduce of SIZE_BYTES over NCCL across every rank, its bus bandwidth against the threshold;
3. below it: each node with its ring neighbours, pair by pair, to find the slow node.
Every collective is bounded (COLLECTIVE_TIMEOUT_SECONDS) and the driver bounds the whole (RUN_TIMEOUT_SECONDS).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from . import names
from .precheck_verdict import (
    PREFIX,
    RESULT_MARKER,
    SIZE_BYTES,
    WARMUP,
    assemble,
    bus_bandwidth_gbps,
    exit_code,
    iterations_for,
    judge,
    local_check,
    message,
    pair_rounds,
    readable,
    report_lines,
    result_lines,
    threshold_gbps,
    verdict,
)

MODULE = "gpucluster_goodput.precheck"
# Rendered by placement/prestep.py: the type's EFA devices (hardware/efa.py) and 2-node all_reduce bus
# bandwidth (hardware/nccl.py expected_busbw_gbps), and the node's name (downward API spec.nodeName).
EFA_DEVICES_ENV = "GPUCLUSTER_PRE_STEP_EFA_DEVICES"
EXPECTED_GBPS_ENV = "GPUCLUSTER_PRE_STEP_EXPECTED_GBPS"
NODE_NAME_ENV = "GPUCLUSTER_NODE_NAME"
POOL_ENV = "GPUCLUSTER_PRE_STEP_POOL"  # the job's pool: whether it enforces the check
TERMINATION_LOG_ENV = "GPUCLUSTER_PRE_STEP_TERMINATION_LOG"  # tests; the kubelet reads /dev/termination-log
RESULT_ENV = "GPUCLUSTER_PRE_STEP_RESULT"  # torchrun driver -> its ranks: where local rank 0 puts the verdict
STARTED_ENV = "GPUCLUSTER_PRE_STEP_STARTED"  # the driver's start (unix seconds): `seconds` counts from it
TERMINATION_LOG = "/dev/termination-log"
SYSFS = "/sys"
# Each collective of the check takes seconds; NCCL's set-up across 16 nodes over EFA, tens. Beyond this a hung
# peer ends the check (gloo raises; NCCL's watchdog tears the rank down) instead of holding the job's nodes.
COLLECTIVE_TIMEOUT_SECONDS = 180
# torchrun's static rendezvous waits 600 s for every node (torch/distributed/elastic/rendezvous/
# static_tcp_rendezvous.py _default_timeout_seconds): pods of one job may start minutes apart.
RUN_TIMEOUT_SECONDS = 900


def node_name(env: dict[str, str], init_environ: str = "/proc/1/environ") -> str:
    """The Kubernetes node: the downward API's variable, else PID 1's (an mpirun rank started over ssh gets a
    fresh environment; the worker's sshd has the pod's), else the pod's host name."""
    if env.get(NODE_NAME_ENV):
        return env[NODE_NAME_ENV]
    try:
        with open(init_environ, "rb") as f:
            for item in f.read().split(b"\0"):
                key, _, value = item.decode(errors="replace").partition("=")
                if key == NODE_NAME_ENV and value:
                    return value
    except OSError:
        pass
    return socket.gethostname()


def ranks_from_env(env: dict[str, str]) -> tuple[int, int, int, int]:
    """(rank, world size, local rank, local world size) under torchrun or Open MPI's mpirun."""
    if "OMPI_COMM_WORLD_RANK" in env:
        keys = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE")
    else:
        keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    rank, world, local, local_world = (int(env[k]) for k in keys)
    return rank, world, local, local_world


# -- the ranks: the flow over a communicator (TorchComm, or a fake in tests) ----------------------------------

def rank_flow(comm: Any, node: str, local: dict[str, str] | None, expected_gbps: float, started: float) -> str:
    """One rank's part; every rank returns rank 0's message. `comm`: rank, world, gather(obj) -> every rank's,
    broadcast(obj) -> rank 0's, groups(rank lists) -> handles (all ranks, same order), measure(handle, ranks)
    -> GB/s, barrier(). `local`: local_check() on local rank 0, None on the others."""
    entries = comm.gather({"node": node, "rank": comm.rank, "local": local})
    ranks: dict[str, list[int]] = {}
    results: dict[str, dict[str, str]] = {}
    for entry in sorted(entries, key=lambda e: e["rank"]):
        ranks.setdefault(entry["node"], []).append(entry["rank"])
        if entry["local"] is not None:
            results[entry["node"]] = entry["local"]
    for missing in set(ranks) - set(results):
        results[missing] = verdict(names.VERDICT_FAIL, "no-local-check", "no local rank 0 reported")
    results = {n: results[n] for n in ranks}
    busbw, pairs = None, None
    if all(v["verdict"] == names.VERDICT_PASS for v in results.values()):
        (everyone,) = comm.groups([list(range(comm.world))])
        busbw = comm.measure(everyone, comm.world)
        if busbw < threshold_gbps(expected_gbps) and len(ranks) >= 2:
            order = list(ranks)
            planned = [[(order[a], order[b]) for a, b in r] for r in pair_rounds(len(order))]
            handles = iter(comm.groups([sorted(ranks[a] + ranks[b]) for r in planned for a, b in r]))
            mine = {}
            for pairs_of_round in planned:
                for pair in pairs_of_round:
                    handle = next(handles)
                    if node in pair:
                        mine[pair] = comm.measure(handle, len(ranks[pair[0]]) + len(ranks[pair[1]]))
                comm.barrier()  # the next round's pairs start once every NIC is free
            pairs = {p: bw for part in comm.gather(mine) for p, bw in part.items()}
    verdicts = judge(results, busbw, expected_gbps, pairs)
    return comm.broadcast(message(verdicts, busbw, expected_gbps, time.time() - started))


class TorchComm:
    """rank_flow's communicator: gloo for objects (works without EFA), NCCL for the measured all_reduces."""

    def __init__(self, rank: int, world: int, local_rank: int):
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.rank, self.world = torch, dist, rank, world
        self.timeout = timedelta(seconds=COLLECTIVE_TIMEOUT_SECONDS)
        self.device = None
        if local_rank < torch.cuda.device_count():
            self.device = torch.device("cuda", local_rank)
            torch.cuda.set_device(self.device)
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world, timeout=self.timeout)

    def gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world
        self.dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        self.dist.broadcast_object_list(box, src=0)
        return box[0]

    def groups(self, rank_lists: list[list[int]]) -> list[Any]:
        return [self.dist.new_group(ranks, timeout=self.timeout, backend="nccl") for ranks in rank_lists]

    def barrier(self) -> None:
        self.dist.barrier()

    def measure(self, group: Any, ranks: int) -> float:
        torch, dist = self.torch, self.dist
        data = torch.zeros(SIZE_BYTES // 4, dtype=torch.float32, device=self.device)

        def timed(count: int) -> Any:
            start = time.perf_counter()
            for _ in range(count):
                dist.all_reduce(data, group=group)
            torch.cuda.synchronize(self.device)
            return torch.tensor([(time.perf_counter() - start) / count], dtype=torch.float64, device=self.device)

        timed(WARMUP)
        probe = timed(1)
        dist.all_reduce(probe, op=dist.ReduceOp.MAX, group=group)  # every rank times the same count
        seconds = timed(iterations_for(probe.item()))
        dist.all_reduce(seconds, group=group)
        return bus_bandwidth_gbps(SIZE_BYTES, seconds.item() / ranks, ranks)

    def close(self) -> None:
        self.dist.destroy_process_group()


def run_rank(env: dict[str, str]) -> int:
    rank, world, local_rank, local_world = ranks_from_env(env)
    started = float(env.get(STARTED_ENV) or time.time())
    node = node_name(env)
    comm = TorchComm(rank, world, local_rank)
    local = None
    if local_rank == 0:
        local = local_check(SYSFS, int(env.get(EFA_DEVICES_ENV) or 0), node, comm.torch.cuda.device_count(),
                            local_world)
    text = rank_flow(comm, node, local, float(env[EXPECTED_GBPS_ENV]), started)
    if local_rank == 0 and env.get(RESULT_ENV):
        with open(env[RESULT_ENV], "w") as f:
            f.write(text)
    if rank == 0 and not env.get(RESULT_ENV):
        for line in result_lines(text):
            print(line, flush=True)
            time.sleep(0.01)  # one line per read of the pipe
    comm.barrier()  # the others tear NCCL down (its INFO lines) once rank 0 has written
    comm.close()
    return 0


# -- the drivers ----------------------------------------------------------------------------------------

def run_child(argv: list[str], env: dict[str, str],
              timeout: float = RUN_TIMEOUT_SECONDS) -> tuple[int | None, list[str]]:
    """Run `argv` in its own process group, echoing its output; killed with its group after `timeout`.
    Returns (its exit code, None when killed; what follows RESULT_MARKER on each line). Waits for the child, not for its
    output to end: a grandchild outside its group (a torchrun worker) may hold the pipe; in the pod the
    container's end takes it."""
    found: list[str] = []
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", start_new_session=True)

    def relay() -> None:
        for line in child.stdout or ():
            sys.stdout.write(line)
            sys.stdout.flush()
            if RESULT_MARKER in line:
                found.append(line.split(RESULT_MARKER, 1)[1].rstrip("\n"))

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    try:
        code: int | None = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        code = None
    reader.join(timeout=5)
    return code, found


def enforced(env: dict[str, str], package_dir: str = os.path.dirname(os.path.abspath(__file__))) -> bool:
    """Whether the job's pool fails jobs on a failed check (names.ENFORCED_POOLS_FILE beside this module)."""
    try:
        with open(os.path.join(package_dir, names.ENFORCED_POOLS_FILE)) as f:
            pools = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(pools, list) and env.get(POOL_ENV, "") in pools


def finish(text: str, env: dict[str, str]) -> int:
    enforcing = enforced(env)
    for line in report_lines(text, enforcing):
        print(line, flush=True)
    code = exit_code(text, enforcing)
    if code == 0:
        return 0  # no termination message: the job's own, if it fails later, is the one to read
    try:
        with open(env.get(TERMINATION_LOG_ENV) or TERMINATION_LOG, "w") as f:
            f.write(text)
    except OSError as err:
        print(f"{PREFIX} cannot write the termination message: {err}", file=sys.stderr, flush=True)
    return code


def incomplete(env: dict[str, str], started: float, why: str, node: str | None = None) -> str:
    """The message when no verdict came back: this node's own check when known, nobody blamed but itself."""
    verdicts = {}
    if node is not None:
        own = local_check(SYSFS, int(env.get(EFA_DEVICES_ENV) or 0), node)
        verdicts[node] = own if own["verdict"] == names.VERDICT_FAIL else \
            verdict(names.VERDICT_PEER, "check-incomplete", f"its own check passed ({own['detail']})")
    expected = float(env[EXPECTED_GBPS_ENV]) if env.get(EXPECTED_GBPS_ENV) else None
    return message(verdicts, None, expected, time.time() - started, error=why)


def drive(mode: str, argv: list[str], env: dict[str, str]) -> int:
    started = time.time()
    if importlib.util.find_spec("torch") is None:
        print(f"{PREFIX} skipped: the image has no PyTorch", flush=True)
        return 0
    env = {**env, STARTED_ENV: f"{started:.3f}"}
    if mode == "mpirun":
        code, payloads = run_child(argv, env)
        text, what, node = assemble(payloads), f"mpirun ({argv[0]})", None
    else:
        node = node_name(env)
        port = int(env.get("PET_MASTER_PORT") or env.get("MASTER_PORT") or 29500) + 1  # apart from the job's
        with tempfile.TemporaryDirectory() as tmp:
            result = os.path.join(tmp, "result.json")
            code, _ = run_child([sys.executable, "-m", "torch.distributed.run", f"--master-port={port}",
                                 "--module", MODULE, "rank"], {**env, RESULT_ENV: result})
            text = ""
            if os.path.exists(result):
                with open(result) as f:
                    text = f.read()
        what = "torchrun"
    if not readable(text):
        ended = f"did not end within {RUN_TIMEOUT_SECONDS} s" if code is None else f"exited {code}"
        text = incomplete(env, started, f"{what} {ended} without a verdict (its output above says why)", node)
    return finish(text, env)


def main(argv: list[str]) -> int:
    if argv[:1] == ["rank"]:
        return run_rank(dict(os.environ))
    if argv[:1] == ["torchrun"] or (argv[:1] == ["mpirun"] and len(argv) > 1):
        return drive(argv[0], argv[1:], dict(os.environ))
    print(f"usage: python3 -m {MODULE} torchrun | mpirun MPIRUN-ARGV... | rank", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
