"""Export before unlinking, and waiting for tasks before deleting the file system (botocore Stubber:
moto has no FSx data repository tasks). Time is a fake clock: nothing sleeps."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from components.hooks import fsx_export
from components.hooks.fsx_export import Clock, ExportError

FS = "fs-0123456789abcdef0"
DRA = "dra-0123456789abcdef0"
TASK = "task-0123456789abcdef0"
BUCKET_PATH = "s3://gpucluster-prod-data-1a2b3c4d/"
EVENTS = ["NEW", "CHANGED", "DELETED"]
T0 = datetime(2026, 12, 3, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def clock(self) -> Clock:
        return Clock(now=lambda: self.t, sleep=self._sleep)

    def _sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


@pytest.fixture
def fsx(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("fsx", region_name="us-east-1")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def link(lifecycle="AVAILABLE", events=EVENTS, path="/", **extra) -> dict:
    s3 = {"AutoImportPolicy": {"Events": EVENTS}}
    if events is not None:
        s3["AutoExportPolicy"] = {"Events": events}
    return {"Associations": [{"AssociationId": DRA, "FileSystemId": FS, "Lifecycle": lifecycle,
                              "FileSystemPath": path, "DataRepositoryPath": BUCKET_PATH, "S3": s3, **extra}]}


def task(lifecycle, total=None, done=0, failed=0, **extra) -> dict:
    status = {"SucceededCount": done, "FailedCount": failed}
    if total is not None:
        status["TotalCount"] = total
    return {"DataRepositoryTasks": [{"TaskId": TASK, "Lifecycle": lifecycle, "Type": "EXPORT_TO_REPOSITORY",
                                     "CreationTime": T0, "FileSystemId": FS, "Status": status, **extra}]}


def created() -> dict:
    return {"DataRepositoryTask": task("PENDING")["DataRepositoryTasks"][0]}


RUNNING_FILTER = {"Filters": [{"Name": "file-system-id", "Values": [FS]},
                              {"Name": "task-lifecycle", "Values": ["PENDING", "EXECUTING", "CANCELING"]}]}
REPORT = {"Enabled": True, "Path": f"{BUCKET_PATH}gpucluster-export-reports", "Format": "REPORT_CSV_20191124",
          "Scope": "FAILED_FILES_ONLY"}


def expect_start(stub, events=EVENTS, path="/"):
    """Link described, no task running, automatic export turned off, the export task created."""
    stub.add_response("describe_data_repository_associations", link(events=events, path=path),
                      {"AssociationIds": [DRA]})
    stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": []}, RUNNING_FILTER)
    if events:
        stub.add_response("update_data_repository_association", {},
                          {"AssociationId": DRA, "S3": {"AutoExportPolicy": {"Events": []}}})
        stub.add_response("describe_data_repository_associations", link("UPDATING", events=[], path=path),
                          {"AssociationIds": [DRA]})
        stub.add_response("describe_data_repository_associations", link(events=[], path=path),
                          {"AssociationIds": [DRA]})
    request = {"Type": "EXPORT_TO_REPOSITORY", "FileSystemId": FS, "Report": REPORT}
    paths = fsx_export.export_paths(path)
    if paths:
        request["Paths"] = paths
    stub.add_response("create_data_repository_task", created(), request)


def expect_restore(stub):
    stub.add_response("update_data_repository_association", {},
                      {"AssociationId": DRA, "S3": {"AutoExportPolicy": {"Events": EVENTS}}})


def run(client, clock, timeout=3600, restore=EVENTS):
    logs: list[str] = []
    result = fsx_export.export_before_unlink(client, DRA, timeout, restore, clock=clock.clock(), log=logs.append,
                                             poll_seconds=30)
    return result, logs


def test_paths_are_relative_to_the_mount_and_empty_for_the_root():
    assert fsx_export.export_paths("/") == []
    assert fsx_export.export_paths("/ns1") == ["ns1"]
    assert fsx_export.export_paths("/ns1/deep/") == ["ns1/deep"]
    assert fsx_export.report_path("s3://b/") == "s3://b/gpucluster-export-reports"


def test_export_succeeds_after_turning_automatic_export_off(fsx):
    client, stub = fsx
    clock = FakeClock()
    expect_start(stub)
    stub.add_response("describe_data_repository_tasks", task("EXECUTING", total=1200, done=300), {"TaskIds": [TASK]})
    stub.add_response("describe_data_repository_tasks", task("SUCCEEDED", total=1200, done=1200), {"TaskIds": [TASK]})
    result, logs = run(client, clock)
    assert (result.task_id, result.exported_files, result.note) == (TASK, 1200, "1200 files exported")
    assert clock.slept == [30, 30]  # once for the association's update, once while the task ran
    assert f"{TASK}: EXECUTING, 300 of 1200 files exported" in logs
    assert any(f"exporting / of {FS} to {BUCKET_PATH}" in line for line in logs)


def test_an_association_under_a_subdirectory_exports_that_path_only(fsx):
    client, stub = fsx
    expect_start(stub, path="/checkpoints")
    stub.add_response("describe_data_repository_tasks", task("SUCCEEDED", total=3, done=3), {"TaskIds": [TASK]})
    result, _ = run(client, FakeClock())
    assert result.exported_files == 3


def test_nothing_to_export(fsx):
    client, stub = fsx
    expect_start(stub)
    stub.add_response("describe_data_repository_tasks", task("SUCCEEDED", total=0, done=0), {"TaskIds": [TASK]})
    result, _ = run(client, FakeClock())
    assert (result.exported_files, result.note) == (0, "nothing to export")


def test_without_automatic_export_the_association_is_left_as_it_is(fsx):
    client, stub = fsx
    expect_start(stub, events=None)
    stub.add_response("describe_data_repository_tasks", task("SUCCEEDED", total=5, done=5), {"TaskIds": [TASK]})
    assert run(client, FakeClock(), restore=[])[0].exported_files == 5


def test_a_failed_export_keeps_everything_and_turns_automatic_export_back_on(fsx):
    client, stub = fsx
    expect_start(stub)
    stub.add_response("describe_data_repository_tasks",
                      task("FAILED", total=10, done=7, failed=3, FailureDetails={"Message": "3 files failed"}),
                      {"TaskIds": [TASK]})
    expect_restore(stub)
    with pytest.raises(ExportError) as err:
        run(client, FakeClock())
    message = str(err.value)
    assert f"export {TASK} of {FS} to {BUCKET_PATH} ended FAILED (3 files failed)" in message
    assert f"listed under {BUCKET_PATH}gpucluster-export-reports/" in message
    assert "7 of 10 files exported, 3 failed" in message
    assert message.endswith("The association and the file system are kept, with automatic export back on.")


def test_succeeded_with_failed_files_is_a_failure(fsx):
    client, stub = fsx
    expect_start(stub)
    stub.add_response("describe_data_repository_tasks", task("SUCCEEDED", total=10, done=9, failed=1),
                      {"TaskIds": [TASK]})
    expect_restore(stub)
    with pytest.raises(ExportError, match="9 of 10 files exported, 1 failed"):
        run(client, FakeClock())


def test_a_timed_out_export_is_cancelled_and_fails_safe(fsx):
    client, stub = fsx
    clock = FakeClock()
    expect_start(stub)
    for done in (10, 20):  # the association's update took 30 s of the 60, one poll took the rest
        stub.add_response("describe_data_repository_tasks", task("EXECUTING", total=100, done=done),
                          {"TaskIds": [TASK]})
    stub.add_response("cancel_data_repository_task", {"Lifecycle": "CANCELING", "TaskId": TASK}, {"TaskId": TASK})
    stub.add_response("describe_data_repository_tasks", task("CANCELED", total=100, done=35), {"TaskIds": [TASK]})
    expect_restore(stub)
    with pytest.raises(ExportError) as err:
        run(client, clock, timeout=60)
    message = str(err.value)
    assert "did not finish within 1 min (cancelled; files exported so far stay exported)" in message
    assert "raise storage.exportTimeoutMinutes" in message
    assert "35 of 100 files exported" in message


def test_restore_failure_is_reported_not_hidden(fsx):
    client, stub = fsx
    expect_start(stub)
    stub.add_response("describe_data_repository_tasks", task("CANCELED", total=4, done=1), {"TaskIds": [TASK]})
    stub.add_client_error("update_data_repository_association", "IncompatibleParameterError", "busy")
    with pytest.raises(ExportError, match=r"turning automatic export back on failed \(IncompatibleParameterError\): "
                                          r"run `pulumi up --refresh`"):
        run(client, FakeClock())


def test_a_running_task_is_waited_for_before_the_export(fsx):
    client, stub = fsx
    other = {"DataRepositoryTasks": [{"TaskId": "task-0000000000000000a", "Lifecycle": "EXECUTING",
                                      "Type": "IMPORT_METADATA_FROM_REPOSITORY", "CreationTime": T0}]}
    stub.add_response("describe_data_repository_associations", link(), {"AssociationIds": [DRA]})
    stub.add_response("describe_data_repository_tasks", other, RUNNING_FILTER)
    stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": []}, RUNNING_FILTER)
    stub.add_response("update_data_repository_association", {},
                      {"AssociationId": DRA, "S3": {"AutoExportPolicy": {"Events": []}}})
    stub.add_response("describe_data_repository_associations", link(events=[]), {"AssociationIds": [DRA]})
    stub.add_response("create_data_repository_task", created(),
                      {"Type": "EXPORT_TO_REPOSITORY", "FileSystemId": FS, "Report": REPORT})
    stub.add_response("describe_data_repository_tasks", task("SUCCEEDED", total=1, done=1), {"TaskIds": [TASK]})
    result, logs = run(client, FakeClock())
    assert result.exported_files == 1
    assert logs[0] == f"{FS}: waiting for task-0000000000000000a (IMPORT_METADATA_FROM_REPOSITORY, EXECUTING)"


def test_a_gone_association_has_nothing_to_export(fsx):
    client, stub = fsx
    stub.add_client_error("describe_data_repository_associations", "DataRepositoryAssociationNotFound", "gone",
                          expected_params={"AssociationIds": [DRA]})
    result, _ = run(client, FakeClock())
    assert (result.task_id, result.note) == (None, "the association is already gone: nothing to export")


@pytest.mark.parametrize("state", ["MISCONFIGURED", "FAILED"])
def test_a_broken_association_refuses_to_go_without_an_export(fsx, state):
    client, stub = fsx
    stub.add_response("describe_data_repository_associations",
                      link(state, FailureDetails={"Message": "bucket policy denies FSx"}), {"AssociationIds": [DRA]})
    with pytest.raises(ExportError, match=rf"{DRA} is {state}: FSx cannot export through it \(bucket policy denies "
                                          r"FSx\).*--skip-export"):
        run(client, FakeClock())


def test_file_system_delete_waits_for_running_tasks(fsx):
    client, stub = fsx
    clock = FakeClock()
    running = {"DataRepositoryTasks": [{"TaskId": TASK, "Lifecycle": "EXECUTING", "Type": "EXPORT_TO_REPOSITORY",
                                        "CreationTime": T0}]}
    stub.add_response("describe_data_repository_tasks", running, RUNNING_FILTER)
    stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": []}, RUNNING_FILTER)
    fsx_export.wait_for_tasks(client, FS, 600, clock.clock(), log=lambda _: None, poll_seconds=30)
    assert clock.slept == [30]


def test_file_system_delete_fails_when_a_task_outlives_the_wait(fsx):
    client, stub = fsx
    running = {"DataRepositoryTasks": [{"TaskId": TASK, "Lifecycle": "EXECUTING", "Type": "EXPORT_TO_REPOSITORY",
                                        "CreationTime": T0}]}
    for _ in range(3):
        stub.add_response("describe_data_repository_tasks", running, RUNNING_FILTER)
    with pytest.raises(ExportError, match=rf"{FS} still runs {TASK} \(EXPORT_TO_REPOSITORY, EXECUTING\) after 1 min"):
        fsx_export.wait_for_tasks(client, FS, 60, FakeClock().clock(), log=lambda _: None, poll_seconds=30)
