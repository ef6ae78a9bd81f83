"""Flush an FSx for Lustre file system to S3 before its link goes, and let its tasks end before it goes.

DeleteFileSystem exports nothing, and once a data repository association is
deleted nothing links the files to S3 any more; with automatic export the
newest files may still be queued. So before the association is deleted:

1. wait for any running data repository task of the file system (FSx runs
   one at a time);
2. turn automatic export off on the association: automatic export and an
   export task cannot run at the same time (FSx Lustre User Guide,
   "Exporting changes to the data repository"), and an export task exports
   every file created or changed since the last export, so nothing queued is
   lost by it;
3. run an EXPORT_TO_REPOSITORY task over the association's path, with a
   failed-files report in the bucket, and wait for it;
4. if it fails, is cancelled or takes longer than the timeout (then it is
   cancelled: what it exported stays exported), turn automatic export back
   on and raise, so the association, the file system and the data stay.

boto3 calls only (tested with botocore's Stubber: moto has no data
repository tasks); time is injected so tests never sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# FSx API DataRepositoryTaskLifecycle and DataRepositoryLifecycle (botocore fsx service-2.json).
TASK_RUNNING = ("PENDING", "EXECUTING", "CANCELING")
TASK_ENDED = ("SUCCEEDED", "FAILED", "CANCELED")
LINK_SETTLING = ("CREATING", "UPDATING")
LINK_BROKEN = ("MISCONFIGURED", "FAILED")
EXPORT = "EXPORT_TO_REPOSITORY"
# Where the task writes its list of files it could not export, inside the linked bucket
# (CreateDataRepositoryTask Report.Path must be in the linked data repository).
REPORT_PREFIX = "gpucluster-export-reports"
POLL_SECONDS = 30


class ExportError(Exception):
    """The export did not finish: the association and the file system must stay."""


@dataclass(frozen=True)
class Clock:
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class ExportResult:
    association_id: str
    task_id: str | None = None
    exported_files: int = 0
    note: str = ""


@dataclass
class _Deadline:
    clock: Clock
    seconds: float
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock.now()

    def left(self) -> float:
        return self.seconds - (self.clock.now() - self.started)

    def minutes_spent(self) -> float:
        return (self.clock.now() - self.started) / 60


def export_paths(file_system_path: str) -> list[str]:
    """Task paths for an association at `file_system_path`: relative to the mount, none for the root.

    CreateDataRepositoryTask Paths: "relative to the mount point of the file
    system"; without paths the task covers the whole file system.
    """
    relative = file_system_path.strip("/")
    return [relative] if relative else []


def report_path(data_repository_path: str) -> str:
    return f"{data_repository_path.rstrip('/')}/{REPORT_PREFIX}"


def _error_code(err: Exception) -> str:
    return (getattr(err, "response", None) or {}).get("Error", {}).get("Code", "")


def describe_association(fsx, association_id: str) -> dict[str, Any] | None:
    try:
        found = fsx.describe_data_repository_associations(AssociationIds=[association_id])["Associations"]
    except Exception as err:
        if _error_code(err) == "DataRepositoryAssociationNotFound":
            return None
        raise
    return found[0] if found else None


def running_tasks(fsx, file_system_id: str) -> list[dict[str, Any]]:
    tasks, token = [], None
    while True:
        kwargs: dict[str, Any] = {"Filters": [{"Name": "file-system-id", "Values": [file_system_id]},
                                              {"Name": "task-lifecycle", "Values": list(TASK_RUNNING)}]}
        if token:
            kwargs["NextToken"] = token
        page = fsx.describe_data_repository_tasks(**kwargs)
        tasks += page.get("DataRepositoryTasks", [])
        token = page.get("NextToken")
        if not token:
            return tasks


def wait_for_tasks(fsx, file_system_id: str, timeout_seconds: float, clock: Clock = Clock(),
                   log: Callable[[str], None] = print, poll_seconds: float = POLL_SECONDS) -> None:
    """Wait until the file system runs no data repository task (DeleteFileSystem fails while one does)."""
    deadline = _Deadline(clock, timeout_seconds)
    while tasks := running_tasks(fsx, file_system_id):
        names = ", ".join(f"{t['TaskId']} ({t['Type']}, {t['Lifecycle']})" for t in tasks)
        if deadline.left() <= 0:
            raise ExportError(f"{file_system_id} still runs {names} after {deadline.minutes_spent():.0f} min; "
                              "it cannot be deleted while a task runs")
        log(f"{file_system_id}: waiting for {names}")
        clock.sleep(poll_seconds)


def _wait_for_link(fsx, association_id: str, deadline: _Deadline, clock: Clock, poll_seconds: float) -> dict | None:
    while (link := describe_association(fsx, association_id)) is not None and link["Lifecycle"] in LINK_SETTLING:
        if deadline.left() <= 0:
            raise ExportError(f"{association_id} stayed {link['Lifecycle']} for {deadline.minutes_spent():.0f} min")
        clock.sleep(poll_seconds)
    return link


def _set_auto_export(fsx, association_id: str, events: Sequence[str]) -> None:
    fsx.update_data_repository_association(AssociationId=association_id,
                                           S3={"AutoExportPolicy": {"Events": list(events)}})


def _wait_for_task(fsx, task_id: str, deadline: _Deadline, clock: Clock, log: Callable[[str], None],
                   poll_seconds: float) -> dict[str, Any] | None:
    """The task once it ends, or None when the deadline passes first."""
    while True:
        task = fsx.describe_data_repository_tasks(TaskIds=[task_id])["DataRepositoryTasks"][0]
        if task["Lifecycle"] in TASK_ENDED:
            return task
        if deadline.left() <= 0:
            return None
        status = task.get("Status") or {}
        log(f"{task_id}: {task['Lifecycle']}, {status.get('SucceededCount', 0)} of "
            f"{status.get('TotalCount', '?')} files exported")
        clock.sleep(poll_seconds)


def export_before_unlink(fsx, association_id: str, timeout_seconds: float, restore_events: Sequence[str],
                         clock: Clock = Clock(), log: Callable[[str], None] = print,
                         poll_seconds: float = POLL_SECONDS) -> ExportResult:
    """Export everything the association links to S3; raise ExportError (data stays) if it does not finish.

    `restore_events`: the automatic export events to put back when the
    export fails (the association's configured ones).
    """
    deadline = _Deadline(clock, timeout_seconds)
    link = _wait_for_link(fsx, association_id, deadline, clock, poll_seconds)
    if link is None:
        return ExportResult(association_id, note="the association is already gone: nothing to export")
    if link["Lifecycle"] == "DELETING":
        return ExportResult(association_id, note="the association is already being deleted")
    if link["Lifecycle"] in LINK_BROKEN:
        raise ExportError(f"{association_id} is {link['Lifecycle']}: FSx cannot export through it "
                          f"({link.get('FailureDetails', {}).get('Message', 'no details')}); copy what you need "
                          "from the file system first, or destroy with --skip-export to delete it unexported")
    fs_id = link["FileSystemId"]
    # FSx runs one task at a time (CreateDataRepositoryTask: DataRepositoryTaskExecuting).
    wait_for_tasks(fsx, fs_id, max(deadline.left(), 0), clock, log, poll_seconds)

    events = (link.get("S3") or {}).get("AutoExportPolicy", {}).get("Events") or []
    if events:
        log(f"{association_id}: turning automatic export off for the final export task")
        _set_auto_export(fsx, association_id, [])
        _wait_for_link(fsx, association_id, deadline, clock, poll_seconds)
    report = report_path(link["DataRepositoryPath"])
    request: dict[str, Any] = {"Type": EXPORT, "FileSystemId": fs_id,
                               "Report": {"Enabled": True, "Path": report, "Format": "REPORT_CSV_20191124",
                                          "Scope": "FAILED_FILES_ONLY"}}
    if paths := export_paths(link["FileSystemPath"]):
        request["Paths"] = paths
    task_id = fsx.create_data_repository_task(**request)["DataRepositoryTask"]["TaskId"]
    log(f"{association_id}: exporting {link['FileSystemPath']} of {fs_id} to {link['DataRepositoryPath']} "
        f"({task_id})")
    task = _wait_for_task(fsx, task_id, deadline, clock, log, poll_seconds)
    status = (task or {}).get("Status") or {}
    if task is not None and task["Lifecycle"] == "SUCCEEDED" and not status.get("FailedCount"):
        done = int(status.get("SucceededCount") or 0)
        return ExportResult(association_id, task_id, done,
                            note="nothing to export" if not status.get("TotalCount") else f"{done} files exported")

    if task is None:
        fsx.cancel_data_repository_task(TaskId=task_id)
        ended = _wait_for_task(fsx, task_id, _Deadline(clock, 10 * poll_seconds), clock, log, poll_seconds)
        status = (ended or {}).get("Status") or status
        why = (f"did not finish within {timeout_seconds / 60:.0f} min (cancelled; files exported so far stay "
               "exported): raise storage.exportTimeoutMinutes and destroy again")
    else:
        message = (task.get("FailureDetails") or {}).get("Message") or "no details"
        why = f"ended {task['Lifecycle']} ({message}); the files it could not export are listed under {report}/"
    raise ExportError(f"export {task_id} of {fs_id} to {link['DataRepositoryPath']} {why}; "
                      f"{status.get('SucceededCount', 0)} of {status.get('TotalCount', '?')} files exported, "
                      f"{status.get('FailedCount', 0)} failed. The association and the file system are kept"
                      f"{_restore(fsx, association_id, restore_events)}")


def _restore(fsx, association_id: str, events: Sequence[str]) -> str:
    """Put automatic export back as configured; the tail of the failure message says whether it worked."""
    if not events:
        return "."
    try:
        _set_auto_export(fsx, association_id, events)
    except Exception as err:  # the export's failure is the news; say what is left to fix by hand
        return (f"; turning automatic export back on failed ({_error_code(err) or err}): run `pulumi up --refresh` "
                "to restore it")
    return ", with automatic export back on."
