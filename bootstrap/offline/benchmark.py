"""How long the offline plan takes against its floor: importing the provider modules the program uses.

`python -m bootstrap.offline.benchmark [--stack prod] [--runs 3]` prints the
wall time of `python -m bootstrap plan --stack S` and of its floor, each the
best of --runs fresh processes, and their ratio. The floor is a bare Python
importing `pulumi` and the provider modules that define the resource classes
the plan instantiates and the data sources it invokes: what any program
registering those resources must load, however it is written (importing
`pulumi_aws.ec2.vpc` runs `pulumi_aws.ec2`, so the whole subpackage counts). `--max-ratio R` exits 1 above R. A benchmark,
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

# Runs the plan in this process, noting the module of every resource class it
# instantiates and of every provider function it invokes.
_LIST_MODULES = """
import contextlib, io, json, sys
import pulumi, pulumi.runtime
packages = {packages!r}
used = {{"pulumi"}}
resource_init = pulumi.Resource.__init__
def recording_init(self, *args, **kwargs):
    used.add(type(self).__module__)
    resource_init(self, *args, **kwargs)
pulumi.Resource.__init__ = recording_init
invoke = pulumi.runtime.invoke
def recording_invoke(*args, **kwargs):
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] not in packages:
        frame = frame.f_back
    if frame is not None:
        used.add(frame.f_globals["__name__"])
    return invoke(*args, **kwargs)
pulumi.runtime.invoke = recording_invoke
from bootstrap.verbs import plan
with contextlib.redirect_stdout(io.StringIO()):
    code = plan.main(["--stack", sys.argv[1]])
names = sorted(m for m in used if m.split(".")[0] in packages)
loaded = sum(1 for m in sys.modules if m.split(".")[0] in packages)
print(json.dumps({{"code": code, "modules": names, "loaded": loaded}}))
"""


def provider_modules(stack: str) -> dict:
    """The provider modules defining what `plan --stack stack` registers and invokes, and how many it loads."""
    out = subprocess.run([sys.executable, "-c", _LIST_MODULES.format(packages=PROVIDER_PACKAGES), stack],
                         cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["code"] != 0:
        raise RuntimeError(f"plan --stack {stack} exited {result['code']}")
    return result


def best_wall_time(argv: list[str], runs: int) -> float:
    """The fastest of `runs` fresh processes of `argv`, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def measure(stack: str, runs: int) -> dict[str, float | int]:
    used = provider_modules(stack)
    imports = "\n".join(f"import {name}" for name in used["modules"])
    floor = best_wall_time([sys.executable, "-c", imports], runs)
    plan = best_wall_time([sys.executable, "-m", "bootstrap", "plan", "--stack", stack], runs)
    return {"modules": len(used["modules"]), "loaded": used["loaded"], "floor_s": round(floor, 3),
            "plan_s": round(plan, 3), "ratio": round(plan / floor, 2)}


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
        print(f"stack {args.stack}: plan {result['plan_s']:.2f} s; floor {result['floor_s']:.2f} s (importing the "
              f"{result['modules']} modules that define its resources and data sources; the plan loads "
              f"{result['loaded']} provider modules); ratio {result['ratio']:.2f} (goal <= {TARGET_RATIO})")
    return 1 if args.max_ratio is not None and result["ratio"] > args.max_ratio else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
