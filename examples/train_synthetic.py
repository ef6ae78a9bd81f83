"""A small GPT-style model trained with DistributedDataParallel on synthetic tokens: the shipped stacks' example.

Runs as it is under both launchers, in any image with PyTorch (the AWS
PyTorch Deep Learning Container has it): torchrun sets RANK, WORLD_SIZE,
LOCAL_RANK and the rendezvous; mpirun sets OMPI_COMM_WORLD_* and the MPIJob
passes MASTER_ADDR/MASTER_PORT. What a gpucluster job gets, it uses:

- GPUCLUSTER_CHECKPOINT_DIR: a checkpoint every --checkpoint-every steps and
  on SIGTERM (a drain, a Spot interruption, `bootstrap cancel`), written
  aside and renamed, so a half-written one is never resumed from; on start
  it resumes from the newest one of this job;
- GPUCLUSTER_TENSORBOARD_DIR: loss, tokens/s and step time (rank 0);
- GPUCLUSTER_METRICS_PORT: gpucluster_job_tokens_per_second,
  gpucluster_job_step_seconds, gpucluster_job_loss and the counter
  gpucluster_job_steps_total in Prometheus' text format, one server per
  node (local rank 0), no extra package.

For the goodput accounting (`bootstrap report`, README "Goodput"), rank 0
prints a line after each optimizer step and after each complete checkpoint,
the two lines to add to a script of your own:

    print(f"gpucluster-step step={step} time={time.time():.3f}", flush=True)
    print(f"gpucluster-checkpoint step={step} start={began:.3f} end={time.time():.3f}", flush=True)

    torchrun --nproc-per-node 8 train_synthetic.py --steps 2000
"""

from __future__ import annotations

import argparse
import http.server
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

STEP_DIR = re.compile(r"step-(\d+)")


def ranks(env: dict[str, str]) -> tuple[int, int, int]:
    """(rank, world size, local rank) under torchrun or mpirun; one process otherwise."""
    for rank, size, local in (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                              ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")):
        if rank in env:
            return int(env[rank]), int(env[size]), int(env.get(local, "0"))
    return 0, 1, 0


def checkpoint_root(env: dict[str, str]) -> Path | None:
    base = env.get("GPUCLUSTER_CHECKPOINT_DIR")
    return Path(base) / env.get("GPUCLUSTER_JOB", "train_synthetic") if base else None


def newest_checkpoint(root: Path | None) -> Path | None:
    """The complete checkpoint with the highest step (a half-written one is still named .tmp-*)."""
    if root is None or not root.is_dir():
        return None
    steps = [(int(m[1]), p) for p in root.iterdir() if (m := STEP_DIR.fullmatch(p.name)) and (p / "state.pt").exists()]
    return max(steps)[1] if steps else None


def step_line(step: int, at: float) -> str:
    """What the goodput accounting reads (components/core/goodput/steps.py parses it)."""
    return f"gpucluster-step step={step} time={at:.3f}"


def checkpoint_line(step: int, began: float, end: float) -> str:
    return f"gpucluster-checkpoint step={step} start={began:.3f} end={end:.3f}"


def metrics_text(values: dict[str, float]) -> str:
    """Prometheus' text exposition format: a counter for a name ending in _total, a gauge otherwise."""
    lines = []
    for name, value in values.items():
        kind = "counter" if name.endswith("_total") else "gauge"
        lines += [f"# TYPE {name} {kind}", f"{name} {value:.6g}" if kind == "gauge" else f"{name} {int(value)}"]
    return "\n".join(lines) + "\n"


def serve_metrics(port: int, values: dict[str, float]) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = metrics_text(values).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)  # noqa: S104 (scraped by Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per GPU")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--checkpoint-every", type=int, default=200)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    args, env = parse_args(argv), dict(os.environ)
    rank, world, local = ranks(env)
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local)})
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # checkpoint at the next step, then leave

    class TinyGPT(nn.Module):
        """Token embedding, causal pre-norm transformer layers, a head over the vocabulary."""

        def __init__(self) -> None:
            super().__init__()
            layer = nn.TransformerEncoderLayer(args.width, max(1, args.width // 64), 4 * args.width,
                                               batch_first=True, norm_first=True)
            self.embed = nn.Embedding(args.vocab, args.width)
            self.layers = nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False)
            self.head = nn.Linear(args.width, args.vocab)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(args.seq_len),
                                 persistent=False)

        def forward(self, tokens):
            return self.head(self.layers(self.embed(tokens), mask=self.mask, is_causal=True))

    model = nn.parallel.DistributedDataParallel(TinyGPT().to(device), device_ids=[local] if cuda else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    root, step = checkpoint_root(env), 0
    if (found := newest_checkpoint(root)) is not None:
        state = torch.load(found / "state.pt", map_location=device)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        if rank == 0:
            print(f"resumed from {found} at step {step}", flush=True)

    def save() -> None:
        if root is None:
            return
        began = time.time()
        if rank == 0:
            tmp = root / f".tmp-step-{step}"
            tmp.mkdir(parents=True, exist_ok=True)
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                       tmp / "state.pt")
            final = root / f"step-{step}"
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
            print(f"checkpoint saved to {final}", flush=True)
        dist.barrier()  # every rank waits for it: the checkpoint ends here
        if rank == 0:
            print(checkpoint_line(step, began, time.time()), flush=True)

    writer = None
    if rank == 0 and env.get("GPUCLUSTER_TENSORBOARD_DIR"):
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(env["GPUCLUSTER_TENSORBOARD_DIR"])
    gauges: dict[str, float] = {}
    if local == 0 and env.get("GPUCLUSTER_METRICS_PORT"):
        serve_metrics(int(env["GPUCLUSTER_METRICS_PORT"]), gauges)

    generator = torch.Generator(device="cpu").manual_seed(1234 + rank)
    done = 0  # steps this process completed: the counter a restart starts again from 0
    while step < args.steps:
        started = time.perf_counter()
        tokens = torch.randint(args.vocab, (args.batch_size, args.seq_len + 1), generator=generator).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            logits = model(tokens[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        done += 1
        seconds = time.perf_counter() - started
        # This process's tokens times the node's processes: what one node's metrics server reports.
        per_node = int(env.get("LOCAL_WORLD_SIZE", env.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1")))
        tokens_per_second = args.batch_size * args.seq_len * per_node / seconds
        gauges.update({"gpucluster_job_tokens_per_second": tokens_per_second,
                       "gpucluster_job_step_seconds": seconds, "gpucluster_job_loss": loss.item(),
                       "gpucluster_job_steps_total": done})
        if rank == 0:  # after loss.item(): the step's GPU work is done
            print(step_line(step, time.time()), flush=True)
        if rank == 0 and (step % 10 == 0 or step == 1):
            print(f"step {step} loss {loss.item():.4f} step_time {seconds:.3f}s tokens/s {tokens_per_second:.0f}",
                  flush=True)
            if writer:
                writer.add_scalar("loss", loss.item(), step)
                writer.add_scalar("tokens_per_second_per_node", tokens_per_second, step)
                writer.add_scalar("step_seconds", seconds, step)
        # Every rank must agree to stop, or the others would wait in the next all-reduce.
        flag = torch.tensor([1.0 if stop.is_set() else 0.0], device=device)
        dist.all_reduce(flag)
        if flag.item() > 0 or step % args.checkpoint_every == 0 or step == args.steps:
            save()
        if flag.item() > 0:
            if rank == 0:
                print(f"stopping at step {step} on SIGTERM; the next run resumes here", flush=True)
            break
    if writer:
        writer.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
