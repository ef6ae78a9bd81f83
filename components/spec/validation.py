"""A small reader for nested config that collects every problem at once.

`Section` wraps one mapping at a key path. Each typed getter records a
problem (path, bad value, what is allowed) instead of raising, and returns a
placeholder so parsing can go on and find the next problem. `finish()` flags
every key that no getter asked for, so a typo never falls back to a default.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
_MISSING = object()


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(Exception):
    """Every problem found in a stack's config, reported together."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = list(problems)
        super().__init__(self.render())

    def render(self) -> str:
        n = len(self.problems)
        lines = [f"gpucluster: {n} configuration problem{'s' if n != 1 else ''}:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def show(value: Any) -> str:
    """A value as the user wrote it, for messages."""
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


@dataclass
class Problems:
    items: list[Problem] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.items.append(Problem(path, message))

    def bad(self, path: str, value: Any, allowed: str) -> None:
        self.add(path, f"got {show(value)}; {allowed}")

    def raise_if_any(self) -> None:
        if self.items:
            raise ConfigError(self.items)


class Section:
    """One mapping in the config, read key by key."""

    def __init__(self, raw: Any, path: str, problems: Problems, sep: str = "."):
        self.path = path
        self.problems = problems
        self._sep = sep
        self._read: set[str] = set()
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            problems.bad(path, raw, "must be a mapping")
            raw = {}
        self.raw: dict[str, Any] = raw

    def key_path(self, key: str) -> str:
        return f"{self.path}{self._sep}{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.raw and self.raw[key] is not None

    def _take(self, key: str) -> Any:
        self._read.add(key)
        value = self.raw.get(key, _MISSING)
        return _MISSING if value is None else value

    def value(self, key: str) -> Any:
        """The raw value (None when absent), marking the key as read."""
        value = self._take(key)
        return None if value is _MISSING else value

    def skip(self, key: str) -> None:
        """Mark a key as handled by the caller."""
        self._read.add(key)

    def _missing(self, key: str, default: Any, required: bool, what: str) -> Any:
        if required:
            self.problems.add(self.key_path(key), f"is required ({what})")
        return default

    # -- scalars -----------------------------------------------------------

    def string(self, key: str, default: str | None = None, *, required: bool = False,
               pattern: str | None = None, allowed: str = "", max_len: int | None = None) -> str | None:
        value = self._take(key)
        what = allowed or "a string"
        if value is _MISSING:
            return self._missing(key, default, required, what)
        if not isinstance(value, str):
            self.problems.bad(self.key_path(key), value, f"must be {what}")
            return default
        if pattern and not re.fullmatch(pattern, value):
            self.problems.bad(self.key_path(key), value, f"must be {what}")
            return default
        if max_len is not None and len(value) > max_len:
            self.problems.bad(self.key_path(key), value, f"must be at most {max_len} characters")
            return default
        return value

    def enum(self, key: str, choices: Iterable[str], default: str | None = None, *,
             required: bool = False) -> str | None:
        choices = tuple(choices)
        value = self._take(key)
        what = "one of " + ", ".join(choices)
        if value is _MISSING:
            return self._missing(key, default, required, what)
        if value not in choices:
            self.problems.bad(self.key_path(key), value, f"allowed: {', '.join(choices)}")
            return default
        return value

    def integer(self, key: str, default: int | None = None, *, required: bool = False,
                minimum: int | None = None, maximum: int | None = None) -> int | None:
        value = self._take(key)
        what = _range_text("an integer", minimum, maximum)
        if value is _MISSING:
            return self._missing(key, default, required, what)
        # Top-level Pulumi config arrives as strings: accept "4" there.
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.problems.bad(self.key_path(key), value, f"must be {what}")
            return default
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            self.problems.bad(self.key_path(key), value, f"must be {what}")
            return default
        return value

    def number(self, key: str, default: float | None = None, *, required: bool = False,
               minimum: float | None = None, maximum: float | None = None,
               exclusive_minimum: bool = False) -> float | None:
        value = self._take(key)
        what = _range_text("a number", minimum, maximum, exclusive_minimum)
        if value is _MISSING:
            return self._missing(key, default, required, what)
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problems.bad(self.key_path(key), value, f"must be {what}")
            return default
        too_low = minimum is not None and (value <= minimum if exclusive_minimum else value < minimum)
        if too_low or (maximum is not None and value > maximum):
            self.problems.bad(self.key_path(key), value, f"must be {what}")
            return default
        return float(value)

    def boolean(self, key: str, default: bool | None = None, *, required: bool = False) -> bool | None:
        value = self._take(key)
        if value is _MISSING:
            return self._missing(key, default, required, "true or false")
        if isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        if not isinstance(value, bool):
            self.problems.bad(self.key_path(key), value, "must be true or false")
            return default
        return value

    # -- containers --------------------------------------------------------

    def section(self, key: str) -> Section:
        value = self._take(key)
        return Section(None if value is _MISSING else value, self.key_path(key), self.problems)

    def items(self, key: str) -> list[tuple[str, Any]]:
        """A list value as (path, item) pairs; bad or missing gives []."""
        value = self._take(key)
        if value is _MISSING:
            return []
        if not isinstance(value, list):
            self.problems.bad(self.key_path(key), value, "must be a list")
            return []
        return [(f"{self.key_path(key)}[{i}]", item) for i, item in enumerate(value)]

    def string_list(self, key: str, check: Callable[[str, str], str | None] | None = None,
                    what: str = "a string") -> tuple[str, ...]:
        out = []
        for path, item in self.items(key):
            if not isinstance(item, str):
                self.problems.bad(path, item, f"must be {what}")
                continue
            if check is not None and (reason := check(path, item)) is not None:
                self.problems.bad(path, item, reason)
                continue
            out.append(item)
        return tuple(out)

    def string_map(self, key: str, key_pattern: str | None = None, key_what: str = "",
                   value_check: Callable[[str], str | None] | None = None) -> dict[str, str]:
        value = self._take(key)
        if value is _MISSING:
            return {}
        if not isinstance(value, dict):
            self.problems.bad(self.key_path(key), value, "must be a mapping of strings")
            return {}
        out = {}
        for k, v in value.items():
            path = f"{self.key_path(key)}.{k}"
            if key_pattern and not re.fullmatch(key_pattern, str(k)):
                self.problems.add(path, f"key {show(k)} is not {key_what}")
                continue
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                self.problems.bad(path, v, "must be a string")
                continue
            v = str(v)
            if value_check is not None and (reason := value_check(v)) is not None:
                self.problems.bad(path, v, reason)
                continue
            out[str(k)] = v
        return out

    def finish(self) -> None:
        """Report keys nobody read: typos must not pass silently."""
        known = sorted(self._read)
        for key in self.raw:
            if key not in self._read:
                hint = f"; known keys: {', '.join(known)}" if known else ""
                self.problems.add(self.key_path(key), f"unknown key{hint}")


def _range_text(noun: str, minimum, maximum, exclusive_minimum: bool = False) -> str:
    lo = ">" if exclusive_minimum else ">="
    if minimum is not None and maximum is not None and not exclusive_minimum:
        return f"{noun} from {minimum} to {maximum}"
    if minimum is not None and maximum is not None:
        return f"{noun} {lo} {minimum} and <= {maximum}"
    if minimum is not None:
        return f"{noun} {lo} {minimum}"
    if maximum is not None:
        return f"{noun} <= {maximum}"
    return noun


# -- shared value checks (return a reason, or None when fine) ----------------

def check_cidr(value: str) -> str | None:
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        return f"must be an IPv4 CIDR block such as 10.0.0.0/16 ({exc})"
    return None


# RFC 5737: reserved for documentation, never routed. EKS rejects them in
# publicAccessCidrs, and nobody deploys from one.
DOCUMENTATION_RANGES = tuple(ipaddress.IPv4Network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))


def check_public_cidr(value: str) -> str | None:
    """A CIDR the public EKS endpoint can see traffic from: public, not a documentation range."""
    reason = check_cidr(value)
    if reason:
        return reason
    net = ipaddress.IPv4Network(value)
    if any(net.overlaps(doc) for doc in DOCUMENTATION_RANGES):
        return ("is a documentation-only range (RFC 5737) that EKS rejects; use the address you deploy from "
                "(`curl -s https://checkip.amazonaws.com`, as a /32)")
    if net.prefixlen and (net.is_private or net.is_reserved or net.is_multicast or net.is_loopback
                          or net.is_link_local):
        return ("is not a public range; the public endpoint only sees public source addresses "
                "(EKS rejects private and reserved ranges here)")
    return None


# AWS's documentation example accounts: a principal there is a copied example.
EXAMPLE_ACCOUNTS = ("123456789012", "111122223333", "444455556666")

# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns
_IAM_PRINCIPAL_ARN = r"arn:aws(-cn|-us-gov)?:iam::\d{12}:(role|user)(/[\w+=,.@-]+)*/[\w+=,.@-]{1,128}"


def check_principal_arn(value: str) -> str | None:
    """An IAM role or user ARN. Any account is valid (EKS access entries take
    principals of other accounts); whether it exists is preflight's question."""
    if not re.fullmatch(_IAM_PRINCIPAL_ARN, value):
        if ":sts::" in value and ":assumed-role/" in value:
            return ("is a session (assumed-role) ARN; give the role's IAM ARN, arn:aws:iam::<account>:role/<name> "
                    "(`python -m bootstrap whoami` prints it)")
        return "must be an IAM role or user ARN, arn:aws:iam::<12-digit account>:role/<name> or :user/<name>"
    account = value.split(":")[4]
    if account in EXAMPLE_ACCOUNTS:
        return f"is in {account}, an AWS documentation example account; use a role of your own account"
    return None


def is_admin(caller_arn: str, admins: Iterable[str]) -> bool:
    """Whether the caller (a user, or a role session) is among the admin principals.

    An assumed-role session names its role without the role's path
    (arn:aws:sts::<account>:assumed-role/<role>/<session>), so a role matches
    by account and name, whatever its path; no IAM call is needed.
    """
    match = re.fullmatch(r"arn:(aws[\w-]*):sts::(\d{12}):assumed-role/([\w+=,.@-]+)/.+", caller_arn)
    if match is None:
        return caller_arn in admins
    partition, account, role = match.groups()
    pattern = rf"arn:{partition}:iam::{account}:role/(.+/)?{re.escape(role)}"
    return any(re.fullmatch(pattern, arn) for arn in admins)


def unique(problems: Problems, entries: list[tuple[str, str | None]], what: str) -> None:
    """Flag every repeat of a name in (path, name) pairs."""
    seen: dict[str, str] = {}
    for path, name in entries:
        if name is None:
            continue
        if name in seen:
            problems.add(path, f"duplicate {what} {show(name)} (first at {seen[name]})")
        else:
            seen[name] = path
