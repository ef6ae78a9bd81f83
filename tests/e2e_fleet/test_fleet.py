"""A fleet behind one queue on the real Kueue v0.19.2 MultiKueue: three local control planes, a manager (stack
fleet) and two workers (fleet-east, fleet-west), each a stack of this program rendered by the offline plan.

In order: the manager connects to both workers; a job submitted to the fleet goes to the worker with free quota
(the other is busy with a job of its own); `status`, `logs` and `cancel` on the manager follow it there; the
manager's credentials for each worker are rotated three times, the first rotated token is revoked and the fleet still
dispatches; a worker is stopped mid-run: `status` says so, and a job waiting in the fleet's queue goes to the
other worker when it frees; `pause` of the manager holds the fleet's queue.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import yaml

from .conftest import EAST, MANAGER, NAMESPACE, WEST, Fleet, job_file


def _condition(obj: dict, kind: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def _active(the_fleet: Fleet, worker: str) -> bool:
    found = _condition(the_fleet.get(MANAGER, "multikueuecluster", worker), "Active")
    return bool(found and found["status"] == "True")


def _admitted(workload: dict | None) -> bool:
    return bool(workload and (c := _condition(workload, "Admitted")) and c["status"] == "True")


def _status(the_fleet: Fleet) -> dict:
    out = the_fleet.cli("status", "--stack", MANAGER, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    return {job["name"]: job for job in json.loads(out.stdout)}


def _token_of(the_fleet: Fleet, worker: str) -> str:
    secret = the_fleet.get(MANAGER, "secret", f"gpucluster-fleet-{worker}", namespace="kueue-system")
    config = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    return config["users"][0]["user"]["token"]


def _answers(the_fleet: Fleet, worker: str, token: str) -> int:
    """The HTTP status the worker's API server gives `token` (200 valid, 401 revoked)."""
    admin = the_fleet.kubeconfig_of(worker)["clusters"][0]["cluster"]
    context = ssl.create_default_context(cadata=base64.b64decode(admin["certificate-authority-data"]).decode())
    request = urllib.request.Request(f"{admin['server']}/api", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_a_the_manager_reaches_both_workers(the_fleet):
    for worker in (EAST, WEST):
        the_fleet.wait(lambda w=worker: _active(the_fleet, w), f"MultiKueueCluster {worker} Active")
    check = the_fleet.get(MANAGER, "admissioncheck", "gpucluster-fleet")
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    assert _condition(check, "Active")["status"] == "True", check


def test_b_a_fleet_job_goes_to_the_worker_with_free_quota_and_the_verbs_follow_it(the_fleet, tmp_path):
    # fleet-east's pool is busy with a job of its own (submitted to that cluster, not to the fleet).
    out = the_fleet.cli("submit", "--stack", EAST, "--context", EAST, "--file", job_file(tmp_path, "east-local"))
    assert out.returncode == 0, out.stdout + out.stderr
    the_fleet.wait(lambda: the_fleet.running(EAST, "east-local", 2), "east-local running on fleet-east")

    out = the_fleet.cli("submit", "--stack", EAST, "--fleet", "--file", job_file(tmp_path, "fleet-1"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert the_fleet.get(MANAGER, "trainjob", "fleet-1", namespace=NAMESPACE)["spec"]["managedBy"] == \
        "kueue.x-k8s.io/multikueue"
    placed = the_fleet.wait(lambda: (w := the_fleet.workload(MANAGER, "fleet-1")) and
                            (w.get("status") or {}).get("clusterName"), "fleet-1 dispatched")
    assert placed == WEST
    pods = the_fleet.wait(lambda: the_fleet.running(WEST, "fleet-1", 2), "fleet-1 running on fleet-west")
    assert all(p["spec"]["nodeName"].endswith(".us-west-2.compute.internal") for p in pods), pods
    assert the_fleet.pods(EAST, "fleet-1") == [] and the_fleet.pods(MANAGER, "fleet-1") == []
    print(f"fleet-1 -> {placed}: {[p['spec']['nodeName'] for p in pods]}")

    job = the_fleet.wait(lambda: (j := _status(the_fleet).get("fleet-1")) and j.get("worker") == WEST and j,
                         "status on the manager to name fleet-west")
    assert job["workerActive"] is True, job
    text = the_fleet.cli("status", "--stack", MANAGER)
    assert text.returncode == 0 and WEST in text.stdout, text.stdout + text.stderr
    print(text.stdout)
    logs = the_fleet.cli("logs", "fleet-1", "--stack", MANAGER)
    assert logs.returncode == 0, logs.stdout + logs.stderr
    assert logs.stdout.splitlines()[0] == f"job fleet-1 runs on worker {WEST}", logs.stdout


def test_c_the_manager_s_credentials_survive_their_rotation(the_fleet):
    from components.core.fleet_token import __main__ as rotator

    bootstrap = _token_of(the_fleet, EAST)
    tokens = []
    for _ in range(3):
        code = rotator.main(["--kubeconfig", str(the_fleet.kubeconfig),
                             "--namespace", "kueue-system", "--lifetime-seconds", "600"])
        assert code == 0
        tokens.append(_token_of(the_fleet, EAST))
    first, second, third = tokens
    assert len({bootstrap, *tokens}) == 4
    # A rotation revokes the token two rotations old (its anchor deleted; the API server sees that through its
    # cache, within seconds) and keeps the one it replaced for a period, as Kueue reloads the Secret
    # asynchronously: after three, the first is refused, the second and third still answer.
    the_fleet.wait(lambda: _answers(the_fleet, EAST, first) == 401, "the first rotated token revoked", timeout=60)
    assert (_answers(the_fleet, EAST, second), _answers(the_fleet, EAST, third)) == (200, 200)
    for worker in (EAST, WEST):
        the_fleet.wait(lambda w=worker: _active(the_fleet, w), f"MultiKueueCluster {worker} Active after rotation")
    # The manager still reads the workers through the rotated token: the job's status keeps coming back.
    the_fleet.wait(lambda: _status(the_fleet)["fleet-1"]["worker"] == WEST, "status after the rotation")


def test_d_a_lost_worker_is_reported_and_a_waiting_job_goes_to_the_other(the_fleet, tmp_path):
    out = the_fleet.cli("submit", "--stack", WEST, "--fleet", "--file", job_file(tmp_path, "fleet-2"))
    assert out.returncode == 0, out.stdout + out.stderr
    the_fleet.wait(lambda: (w := the_fleet.workload(MANAGER, "fleet-2")) and
                   sorted((w.get("status") or {}).get("nominatedClusterNames") or []) == [EAST, WEST],
                   "fleet-2 offered to both workers (both full)")
    assert _status(the_fleet)["fleet-2"]["worker"] is None, _status(the_fleet)["fleet-2"]

    the_fleet.stop(WEST)  # the worker is lost mid-run
    the_fleet.wait(lambda: not _active(the_fleet, WEST), "MultiKueueCluster fleet-west inactive", timeout=90)
    job = the_fleet.wait(lambda: (j := _status(the_fleet)["fleet-1"]) and j["workerActive"] is False and j,
                         "status to say fleet-1's worker is lost")
    assert job["worker"] == WEST
    text = the_fleet.cli("status", "--stack", MANAGER).stdout
    print(text)
    assert "unreachable" in text, text

    out = the_fleet.cli("cancel", "east-local", "--stack", EAST, "--context", EAST)
    assert out.returncode == 0, out.stdout + out.stderr
    placed = the_fleet.wait(lambda: (w := the_fleet.workload(MANAGER, "fleet-2")) and
                            (w.get("status") or {}).get("clusterName"), "fleet-2 dispatched")
    assert placed == EAST
    the_fleet.wait(lambda: the_fleet.running(EAST, "fleet-2", 2), "fleet-2 running on fleet-east")
    assert _admitted(the_fleet.workload(MANAGER, "fleet-2"))

    out = the_fleet.cli("cancel", "fleet-2", "--stack", MANAGER)
    assert out.returncode == 0 and EAST in out.stdout, out.stdout + out.stderr
    the_fleet.wait(lambda: the_fleet.workload(EAST, "fleet-2") is None and not the_fleet.pods(EAST, "fleet-2"),
                   "fleet-2 gone from fleet-east too", timeout=180)
