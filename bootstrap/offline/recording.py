"""What a mock run of the program registered: every resource with its inputs, options and hooks, and the logs.

RecordingMonitor is Pulumi's mock monitor keeping what the stock one
throws away; a Recording is what the tests and the offline plan read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc


def _unwrap_secrets(value: Any, path: str, secret_paths: set[str]) -> Any:
    """Plain values from the engine's secret envelopes, remembering where they were."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            secret_paths.add(path)
            return _unwrap_secrets(value.get("value"), path, secret_paths)
        return {k: _unwrap_secrets(v, f"{path}.{k}" if path else k, secret_paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v, f"{path}[{i}]", secret_paths) for i, v in enumerate(value)]
    return value


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    dependencies: list[str] = field(default_factory=list)
    protect: bool = False
    retain_on_delete: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    import_id: str = ""
    provider: str = ""
    component_outputs: dict[str, Any] = field(default_factory=dict)
    secret_inputs: set[str] = field(default_factory=set)  # input paths that were secrets
    hooks: dict[str, list[str]] = field(default_factory=dict)  # {"before_delete": [hook names]}, bound hooks only
    custom_timeouts: dict[str, str] = field(default_factory=dict)  # {"update": "320m"}, the ones set
    aliases: list[str] = field(default_factory=list)  # the names (or URNs) it was known by before


@dataclass
class Recording:
    resources: list[Registration]
    stack_outputs: dict[str, Any]
    secret_outputs: set[str]
    logs: list[tuple[str, str]]

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> Registration:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.resources if r.urn == urn)

    def depends_on(self, res: Registration, other: Registration) -> bool:
        """True when `res` waits for `other`, directly or through any chain."""
        seen, todo = set(), list(res.dependencies)
        while todo:
            urn = todo.pop()
            if urn == other.urn:
                return True
            if urn in seen:
                continue
            seen.add(urn)
            dep = next((r for r in self.resources if r.urn == urn), None)
            if dep is not None:
                todo.extend(dep.dependencies)
                # A component waits for its children.
                todo.extend(r.urn for r in self.resources if r.parent == urn)
        return False


_HOOK_KINDS = ("before_create", "after_create", "before_update", "after_update", "before_delete", "after_delete")


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The mock monitor, keeping what the stock one throws away."""

    def __init__(self, mocks: pulumi_mocks.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.outputs_by_urn: dict[str, dict[str, Any]] = {}
        # The stock monitor gives each worker thread an event loop it never
        # closes; we close them when the run ends instead of at garbage collection.
        self.thread_loops: set[asyncio.AbstractEventLoop] = set()

    def _track_thread_loop(self) -> None:
        self.thread_loops.add(pulumi_mocks._ensure_event_loop())

    def close_thread_loops(self) -> None:
        for loop in self.thread_loops:
            if not loop.is_running() and not loop.is_closed():
                loop.close()
        self.thread_loops.clear()

    def Invoke(self, request):
        self._track_thread_loop()
        return super().Invoke(request)

    def RegisterResource(self, request):
        self._track_thread_loop()
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        reg = self.resources[response.urn]
        secret_paths: set[str] = set()
        inputs = _unwrap_secrets(rpc.deserialize_properties(request.object), "", secret_paths)
        self.registrations.append(Registration(
            urn=response.urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            custom=bool(request.custom),
            inputs=inputs,
            secret_inputs=secret_paths,
            outputs=dict(reg.state),
            id=reg.id or "",
            dependencies=list(request.dependencies),
            protect=bool(request.protect),
            retain_on_delete=bool(request.retainOnDelete),
            ignore_changes=list(request.ignoreChanges),
            replace_on_changes=list(request.replaceOnChanges),
            delete_before_replace=bool(request.deleteBeforeReplace),
            import_id=request.importId,
            provider=request.provider,
            hooks={kind: list(getattr(request.hooks, kind)) for kind in _HOOK_KINDS
                   if request.HasField("hooks") and list(getattr(request.hooks, kind))},
            custom_timeouts={kind: getattr(request.customTimeouts, kind) for kind in ("create", "update", "delete")
                             if request.HasField("customTimeouts") and getattr(request.customTimeouts, kind)},
            aliases=[a.spec.name if a.HasField("spec") else a.urn for a in request.aliases] + list(request.aliasURNs),
        ))
        return response

    def RegisterResourceOutputs(self, request):
        self._track_thread_loop()
        self.outputs_by_urn[request.urn] = rpc.deserialize_properties(request.outputs)
        return super().RegisterResourceOutputs(request)


class _LogCatcher:
    def __init__(self):
        self.records: list[tuple[str, str]] = []

    def __getattr__(self, level):
        def log(message, *args, **kwargs):
            if level != "debug":
                self.records.append((level, str(message)))
        return log
