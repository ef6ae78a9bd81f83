"""Build the local control plane's programs from Go modules, once per version.

Each program lands in `<cache>/bin/<name>-<version>/` (the cache is
$GPUCLUSTER_LOCAL_CACHE, else ~/.cache/gpucluster-local); a folder that is
there is never built again, so a warm machine starts at once. Go's own build
and module caches make a rebuild after a version bump incremental.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from local import versions

KUBE_MODULE = Path(__file__).resolve().parent / "modules" / "kube"


def cache_dir() -> Path:
    return Path(os.environ.get("GPUCLUSTER_LOCAL_CACHE") or Path.home() / ".cache" / "gpucluster-local")


def _kube_key() -> str:
    """The control plane's folder changes with our module's go.mod, go.sum or etcd main."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "etcd/main.go"):
        digest.update((KUBE_MODULE / name).read_bytes())
    return f"kube-{versions.KUBERNETES_VERSION}-{digest.hexdigest()[:12]}"


def bin_dir(program: versions.GoProgram | None = None) -> Path:
    """Where a program's binary is (None: the control plane's four)."""
    key = _kube_key() if program is None else f"{program.name}-{program.version}"
    return cache_dir() / "bin" / key


def binary(name: str) -> Path:
    """The path of one built binary by its file name."""
    if name in versions.CONTROL_PLANE_BINARIES:
        return bin_dir() / name
    for program in versions.INSTALLED:
        if program.binary == name:
            return bin_dir(program) / name
    raise KeyError(name)


def _version_ldflags() -> str:
    """What k8s.io/kubernetes' own build stamps (hack/lib/version.sh), so /version answers v1.35.x."""
    version = versions.KUBERNETES_VERSION
    major, minor = version.removeprefix("v").split(".")[:2]
    flags = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.gitVersion={version}", f"-X {package}.gitMajor={major}",
                  f"-X {package}.gitMinor={minor}", f"-X {package}.gitTreeState=clean"]
    return " ".join(flags)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    env["CGO_ENABLED"] = "0"
    return env


def _run(cmd: list[str], cwd: Path | None, log, **env: str) -> None:
    print(f"  $ {' '.join(cmd)}", file=log, flush=True)
    done = subprocess.run(cmd, cwd=cwd, env={**_go_env(), **env}, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} exited {done.returncode}")


class BuildError(RuntimeError):
    pass


def _build_into(target: Path, build) -> float:
    """Run build(tmp) into a fresh folder, then move it to target: a half-built folder never counts."""
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    start = time.monotonic()
    build(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return time.monotonic() - start


def build_all(log=sys.stdout) -> dict[str, float]:
    """Build whatever is missing; return the seconds each build took (absent: it was cached)."""
    if shutil.which("go") is None:
        raise BuildError("the local control plane is built with Go (1.26): `go` is not on PATH")
    seconds: dict[str, float] = {}
    control_plane = bin_dir()
    if not control_plane.is_dir():
        print(f"building Kubernetes {versions.KUBERNETES_VERSION} and etcd {versions.ETCD_VERSION} "
              "(cold: the longest step)", file=log, flush=True)
        packages = [f"k8s.io/kubernetes/cmd/{name}" for name in versions.CONTROL_PLANE_BINARIES if name != "etcd"]
        seconds["kube"] = _build_into(control_plane, lambda tmp: _run(
            ["go", "build", "-mod=readonly", "-trimpath", "-ldflags", _version_ldflags(), "-o", f"{tmp}/",
             *packages, "./etcd"], KUBE_MODULE, log))
    for program in versions.INSTALLED:
        target = bin_dir(program)
        if target.is_dir():
            continue
        print(f"building {program.name} {program.version}", file=log, flush=True)
        # Built inside the module as Go downloaded it, with its own go.mod and go.sum (what `go install
        # pkg@version` does, minus its deprecation lookup, which the proxy refuses for some modules).
        source = module_dir(program)
        seconds[program.name] = _build_into(target, lambda tmp, program=program, source=source: _run(
            ["go", "build", "-mod=readonly", "-trimpath", "-o", str(tmp / program.binary), f"./{program.sub}"],
            source, log, GOWORK="off"))
    if seconds:
        record = cache_dir() / "build-times.json"
        previous = json.loads(record.read_text()) if record.is_file() else {}
        record.write_text(json.dumps({**previous, **{k: round(v, 1) for k, v in seconds.items()}}, indent=1))
    return seconds


def module_dir(program: versions.GoProgram) -> Path:
    """The program's module as Go downloaded it (read-only): its charts, CRDs and stages."""
    out = subprocess.run(["go", "mod", "download", "-json", f"{program.module}@{program.version}"],
                         env=_go_env(), capture_output=True, text=True, cwd=cache_dir())
    if out.returncode != 0:
        raise BuildError(f"go mod download {program.module}@{program.version}: {out.stdout or out.stderr}")
    return Path(json.loads(out.stdout)["Dir"])


def main() -> int:
    cache_dir().mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        built = build_all()
    except BuildError as err:
        print(f"local: build failed: {err}", file=sys.stderr)
        return 2
    total = time.monotonic() - start
    for name, took in built.items():
        print(f"built {name} in {took:.0f} s")
    print(f"local control plane binaries ready in {cache_dir() / 'bin'} ({total:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
