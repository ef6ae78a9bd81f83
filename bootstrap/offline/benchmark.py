"""How long the offline plan takes against its floors: the provider imports, and the SDK registering the same resources.

`python -m bootstrap.offline.benchmark [--stack prod] [--runs 3]` prints the
wall time of `python -m bootstrap plan --stack S` and of two floors, each the
best of --runs fresh processes, and the plan's ratio to each. The first floor
is a bare Python importing `pulumi` and the provider modules that define the
resource classes the plan instantiates and the data sources it invokes: what
any program registering those resources must load, however it is written
(importing `pulumi_aws.ec2.vpc` runs `pulumi_aws.ec2`, so the whole
subpackage counts). The second adds what any program declaring those
resources must also pay: Pulumi's engine (the plan's own mocks) registering
every resource the plan registers, with the same type, name and inputs, and
nothing of ours (no config, no program logic, no report). The goal applies to
the second: the plan at most twice what the SDK itself costs for the same
resources. `--max-ratio R` exits 1 above R. A benchmark, not a test: timings
depend on the machine, so no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
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
from bootstrap.offline import mocks
from bootstrap.verbs import plan
run_program, recordings = mocks.run_program, []
mocks.run_program = lambda *args, **kwargs: recordings.append(run_program(*args, **kwargs)) or recordings[-1]
with contextlib.redirect_stdout(io.StringIO()):
    code = plan.main(["--stack", sys.argv[1]])
names = sorted(m for m in used if m.split(".")[0] in packages)
loaded = sum(1 for m in sys.modules if m.split(".")[0] in packages)
with open(sys.argv[2], "w") as out:
    json.dump([{{"type": r.type, "name": r.name, "custom": r.custom, "inputs": r.inputs}}
               for r in recordings[-1].resources], out, default=str)
print(json.dumps({{"code": code, "modules": names, "loaded": loaded}}))
"""

# The SDK's own floor: the same imports, then Pulumi's engine (the plan's mocks) registering every resource the
# plan registers, with the same type, name and inputs, and nothing else: no config, no program, no report.
_REPLAY = """
import json, sys
{imports}
import pulumi
from bootstrap.offline import mocks
with open(sys.argv[1]) as source:
    registrations = json.load(source)
def program():
    for r in registrations:
        if r["custom"]:
            pulumi.CustomResource(r["type"], r["name"], props=r["inputs"])
        else:
            pulumi.ComponentResource(r["type"], r["name"])
mocks.run_program({{"aws:region": "us-east-1"}}, sys.argv[2], program=program)
"""


def provider_modules(stack: str, registrations: Path) -> dict:
    """The provider modules defining what `plan --stack stack` registers and invokes, and how many it loads;
    what it registers goes to `registrations` (JSON)."""
    out = subprocess.run([sys.executable, "-c", _LIST_MODULES.format(packages=PROVIDER_PACKAGES), stack,
                          str(registrations)], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
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
    with tempfile.TemporaryDirectory() as scratch:
        registrations = Path(scratch) / "registrations.json"
        used = provider_modules(stack, registrations)
        imports = "\n".join(f"import {name}" for name in used["modules"])
        floor = best_wall_time([sys.executable, "-c", imports], runs)
        sdk = best_wall_time([sys.executable, "-c", _REPLAY.format(imports=imports), str(registrations), stack], runs)
        resources = len(json.loads(registrations.read_text()))
    plan = best_wall_time([sys.executable, "-m", "bootstrap", "plan", "--stack", stack], runs)
    return {"modules": len(used["modules"]), "loaded": used["loaded"], "floor_s": round(floor, 3),
            "plan_s": round(plan, 3), "ratio": round(plan / floor, 2), "resources": resources,
            "sdk_s": round(sdk, 3), "sdk_ratio": round(plan / sdk, 2)}


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
        print(f"stack {args.stack}: plan {result['plan_s']:.2f} s; imports {result['floor_s']:.2f} s (the "
              f"{result['modules']} modules that define its resources and data sources; the plan loads "
              f"{result['loaded']} provider modules), ratio {result['ratio']:.2f}; imports and the engine "
              f"registering its {result['resources']} resources {result['sdk_s']:.2f} s, ratio "
              f"{result['sdk_ratio']:.2f} (goal <= {TARGET_RATIO})")
    return 1 if args.max_ratio is not None and result["sdk_ratio"] > args.max_ratio else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
