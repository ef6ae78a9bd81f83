"""The offline plan of a fleet of clusters (pure): the manager's workers, pools and cost; where jobs' data lives.

`plan(cfg, members)` is the report's `fleet` key (None for a stack in no fleet, so its plan is as before);
`render` its text. The workers are the manager's `components.core.fleet.workers.load_workers` members,
read by the caller: this package reads no file.
"""

from components.core.planning.fleet.summary import plan
from components.core.planning.fleet.text import render

__all__ = ["plan", "render"]
