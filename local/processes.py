"""Start, find and stop the local control plane's processes.

Every process runs in its own session with its output in `<state>/logs/`,
and every command line names a path in the state folder, so `stop` finds
each one it started, and any it lost track of, by scanning /proc: nothing
is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path


class LocalClusterError(RuntimeError):
    """Something the local control plane could not do; the message says what and where the log is."""


def _registry(state: Path) -> Path:
    return state / "processes.json"


def _recorded(state: Path) -> dict[str, int]:
    path = _registry(state)
    return json.loads(path.read_text()) if path.is_file() else {}


def start(state: Path, name: str, argv: list[str], env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen:
    """Start argv in the background; its output goes to logs/<name>.log."""
    logs = state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = (logs / f"{name}.log").open("ab")
    # The state folder in every command line is what `stop` finds stray processes by.
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True, env={**os.environ, **(env or {})},
                               cwd=cwd or state)
    log.close()
    recorded = _recorded(state)
    recorded[name] = process.pid
    _registry(state).write_text(json.dumps(recorded, indent=1))
    return process


def log_tail(state: Path, name: str, lines: int = 15) -> str:
    path = state / "logs" / f"{name}.log"
    if not path.is_file():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and ") Z " in stat.read_text())


def _strays(state: Path) -> list[int]:
    """Our built programs whose command line names this state folder (each is given a path in it); a user's
    `tail -f` of a log or kubectl with the kubeconfig names it too, but runs no program of ours."""
    from local import build

    needle, programs = _needle(state), (str(build.cache_dir() / "bin") + "/").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and cmdline.startswith(programs):
            found.append(int(entry.name))
    return found


def ours(pid: int, state: Path) -> bool:
    """The pid is alive and still one of ours (a recorded pid may be reused after a reboot)."""
    try:
        return alive(pid) and _needle(state) in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _needle(state: Path) -> bytes:
    # With the separator: /x/.local-cluster must not match /x/.local-cluster-e2e's processes.
    return (str(state) + "/").encode()


def running(state: Path) -> dict[str, int]:
    return {name: pid for name, pid in _recorded(state).items() if ours(pid, state)}


def _signal(pid: int, signum: int) -> None:
    """Signal the process's group (it leads one: start_new_session), else the process alone."""
    for send in (os.killpg, os.kill):
        try:
            send(pid, signum)
            return
        except (ProcessLookupError, PermissionError):
            continue


KILL_WAIT_SECONDS = 10.0


def stop(state: Path, names: list[str] | None = None, grace: float = 10.0) -> list[str]:
    """SIGTERM each process group (all when names is None), SIGKILL what is left after grace; names stopped."""
    recorded = _recorded(state)
    targets = {n: p for n, p in recorded.items() if names is None or n in names}
    pids = {p for p in targets.values() if ours(p, state)} | (set(_strays(state)) if names is None else set())
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    for pid in pids:
        if alive(pid):
            _signal(pid, signal.SIGKILL)
    # Until the killed are gone too: their listening sockets close only as they exit, and the next cluster's
    # start checks those ports at once (CI once found the apiserver's port still held).
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    remaining = {n: p for n, p in recorded.items() if n not in targets}
    if _registry(state).parent.is_dir():
        _registry(state).write_text(json.dumps(remaining, indent=1))
    return sorted(targets)


def wait_until(check: Callable[[], bool], what: str, timeout: float, state: Path | None = None,
               log: str | None = None, interval: float = 0.25) -> None:
    """Poll check until it holds; on timeout say what did not happen and show the log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet is any error
            pass
        if state is not None and log is not None:
            pid = _recorded(state).get(log)
            if pid is not None and not alive(pid):
                raise LocalClusterError(f"{log} exited while waiting for {what}:\n{log_tail(state, log)}")
        time.sleep(interval)
    tail = f":\n{log_tail(state, log)}" if state is not None and log else ""
    raise LocalClusterError(f"timed out after {timeout:.0f} s waiting for {what}{tail}")


def https_ok(url: str, ca: Path, cert: Path | None = None, key: Path | None = None) -> bool:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False
