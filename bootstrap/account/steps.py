"""What one idempotent set-up step did: created, set, verified or fixed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Step:
    item: str
    outcome: str  # created | set (on something just created) | verified | fixed
    detail: str = ""

    @property
    def changed(self) -> bool:
        return self.outcome != "verified"

    def __str__(self) -> str:
        return f"{self.item}: {self.outcome}{f' ({self.detail})' if self.detail else ''}"
