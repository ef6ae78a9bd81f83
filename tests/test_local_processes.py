"""local/processes.py: stopping a local cluster's processes."""

from __future__ import annotations

import json
import signal

from local import processes


def test_stop_returns_only_once_the_killed_are_gone(tmp_path, monkeypatch):
    # An apiserver that ignores SIGTERM past the grace keeps its port until it has exited after SIGKILL; the next
    # cluster's start checks that port at once, so stop waits for the exit (CI once found the port still held).
    (tmp_path / "processes.json").write_text(json.dumps({"kube-apiserver": 4242}))
    sent: list[int] = []
    checks_after_kill: list[bool] = []

    def alive(pid: int) -> bool:
        if signal.SIGKILL not in sent:
            return True
        checks_after_kill.append(True)
        return len(checks_after_kill) < 4  # the kernel takes a moment to tear the process down

    monkeypatch.setattr(processes, "alive", alive)
    monkeypatch.setattr(processes, "ours", lambda pid, state: True)
    monkeypatch.setattr(processes, "_strays", lambda state: [])
    monkeypatch.setattr(processes, "_signal", lambda pid, signum: sent.append(signum))
    monkeypatch.setattr(processes.time, "sleep", lambda seconds: None)
    assert processes.stop(tmp_path, grace=0.01) == ["kube-apiserver"]
    assert sent == [signal.SIGTERM, signal.SIGKILL]
    assert len(checks_after_kill) == 4  # it asked until the process was gone
