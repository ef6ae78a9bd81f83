"""Waiting on a local cluster: the e2e tiers' (tests/e2e, tests/e2e_fleet) one polling loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from local import kubectl


def wait_for(check: Callable[[], Any], what: str, timeout: float = 90, interval: float = 1.0) -> Any:
    """check()'s first truthy result (a kubectl error counts as not yet), or an AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except kubectl.KubectlError as err:
            last = err
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
