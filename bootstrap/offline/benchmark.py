"""How long the offline plan takes against its floor: importing the provider modules the program uses.

`python -m bootstrap.offline.benchmark [--stack prod] [--runs 3]` prints the
wall time of `python -m bootstrap plan --stack S` and of a bare Python
importing exactly the pulumi, pulumi_aws, pulumi_kubernetes and
pulumi_random modules that plan loads (each the best of --runs fresh
processes), and their ratio. `--max-ratio R` exits 1 above R. A benchmark,
not a test: timings depend on the machine, so no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]
PROVIDER_PACKAGES = ("pulumi", "pulumi_aws", "pulumi_kubernetes", "pulumi_random")
TARGET_RATIO = 2.0

# Runs the plan in this process, then names the provider modules it imported.
_LIST_MODULES = """
import contextlib, io, json, sys
from bootstrap.verbs import plan
with contextlib.redirect_stdout(io.StringIO()):
    code = plan.main(["--stack", sys.argv[1]])
names = sorted(m for m in sys.modules if m.split(".")[0] in {packages!r})
print(json.dumps({{"code": code, "modules": names}}))
"""


def provider_modules(stack: str) -> list[str]:
    """The provider modules `plan --stack stack` imports."""
    out = subprocess.run([sys.executable, "-c", _LIST_MODULES.format(packages=PROVIDER_PACKAGES), stack],
                         cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["code"] != 0:
        raise RuntimeError(f"plan --stack {stack} exited {result['code']}")
    return result["modules"]


def best_wall_time(argv: list[str], runs: int) -> float:
    """The fastest of `runs` fresh processes of `argv`, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def measure(stack: str, runs: int) -> dict[str, float | int]:
    modules = provider_modules(stack)
    imports = "\n".join(f"import {name}" for name in modules)
    floor = best_wall_time([sys.executable, "-c", imports], runs)
    plan = best_wall_time([sys.executable, "-m", "bootstrap", "plan", "--stack", stack], runs)
    return {"modules": len(modules), "floor_s": round(floor, 3), "plan_s": round(plan, 3),
            "ratio": round(plan / floor, 2)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap.offline.benchmark", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per measurement; the best counts")
    parser.add_argument("--max-ratio", type=float, default=None, help=f"exit 1 above this (the goal: {TARGET_RATIO})")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.stack, max(1, args.runs))
    if args.json:
        print(json.dumps({"stack": args.stack, **result}))
    else:
        print(f"stack {args.stack}: plan {result['plan_s']:.2f} s; importing its {result['modules']} provider "
              f"modules {result['floor_s']:.2f} s; ratio {result['ratio']:.2f} (goal <= {TARGET_RATIO})")
    return 1 if args.max_ratio is not None and result["ratio"] > args.max_ratio else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
