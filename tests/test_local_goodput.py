"""The goodput controller on the local control plane (local/goodput/controller.py): the package laid out as the pod
mounts it, started as the rendered ServiceAccount with every path in its command line under the state folder (so
`local down` finds it), a test's Prometheus kept across restarts, and nothing started when the stack renders none."""

from __future__ import annotations

import json

from components.core.observability import goodput_agent as agent
from local import controlplane
from local.goodput import controller as goodput
from tests.conftest import stack_config


def rendered() -> list[dict]:
    return agent.objects(stack_config("prod"))


def test_the_package_is_laid_out_as_the_pod_mounts_it_and_stale_files_go(tmp_path):
    stale = tmp_path / "goodput" / "gpucluster_goodput" / "removed.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("")
    code = agent.code_config_map()
    package = goodput.lay_out(tmp_path, code)
    assert package == tmp_path / "goodput" / "gpucluster_goodput"
    assert sorted(p.name for p in package.iterdir()) == sorted(code["data"])
    assert (package / "controller.py").read_text() == code["data"]["controller.py"]


def test_nothing_starts_when_the_stack_renders_no_controller(tmp_path, monkeypatch):
    said, stopped = [], []
    monkeypatch.setattr(goodput.processes, "stop", lambda state, names: stopped.append(names))
    assert goodput.start(tmp_path, [o for o in rendered() if o["kind"] != "Deployment"], said.append) is False
    assert said == ["  not started: the goodput controller (the stack renders none: observability is off)"]
    assert stopped == [["goodput"]]


def test_it_runs_as_its_service_account_on_loopback_and_keeps_a_test_s_prometheus(tmp_path, monkeypatch):
    started, tokens = [], []
    monkeypatch.setattr(goodput.processes, "stop", lambda state, names: None)
    monkeypatch.setattr(goodput.processes, "wait_until", lambda *args, **kwargs: None)
    monkeypatch.setattr(goodput.processes, "start",
                        lambda state, name, argv, env, cwd: started.append((name, argv, env, cwd)))
    monkeypatch.setattr(goodput.kubectl, "run", lambda state, *args: tokens.append(args) or "a-token\n")
    assert goodput.start(tmp_path, rendered(), lambda line: None) is True
    name, argv, env, cwd = started[-1]
    assert name == "goodput" and cwd == tmp_path / "goodput"
    assert argv[1:] == ["-m", "gpucluster_goodput.controller", "--config", "monitoring/gpucluster-goodput-config",
                        "--bind", "127.0.0.1", "--port", str(controlplane.PORTS.goodput),
                        "--server", "https://127.0.0.1:16443", "--ca-file", f"{tmp_path}/pki/ca.crt",
                        "--token-file", f"{tmp_path}/goodput/token"]
    assert tokens == [("create", "token", "gpucluster-goodput", "-n", "monitoring", "--duration=48h")]
    assert (tmp_path / "goodput" / "token").read_text() == "a-token"
    assert env["PYTHONPATH"] == str(tmp_path / "goodput") and env["GPUCLUSTER_GOODPUT_PROMETHEUS_URL"] == ""
    goodput.restart(tmp_path, "http://127.0.0.1:4321")
    assert started[-1][2]["GPUCLUSTER_GOODPUT_PROMETHEUS_URL"] == "http://127.0.0.1:4321"
    goodput.start(tmp_path, rendered(), lambda line: None)  # `local apply`: the test's Prometheus stays
    assert started[-1][2]["GPUCLUSTER_GOODPUT_PROMETHEUS_URL"] == "http://127.0.0.1:4321"
    assert json.loads((tmp_path / "goodput" / "spec.json").read_text()) == {"prometheusUrl": "http://127.0.0.1:4321"}
    goodput.restart(tmp_path, None)
    assert started[-1][2]["GPUCLUSTER_GOODPUT_PROMETHEUS_URL"] == ""
