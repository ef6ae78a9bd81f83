"""The values.py checks as JSON Schema patterns, for editors: what a check accepts, a pattern matches.

A check (values.py) says why a value is refused; the pattern here is the
same rule for the JSON Schema (`Text(json_pattern=...)`), which the program
applies too, after the check. Patterns are the subset of regular
expressions Python and JavaScript read alike: no named groups, no inline
flags, \\d and \\w spelled out as ASCII classes.

Where a rule cannot be a pattern (a public range's host bits beyond /32,
a file of the repository), the pattern is the shape and the key's
description states the rest (tests/test_schema_agreement.py VALUE_RULES).
"""

from __future__ import annotations

from collections.abc import Iterable

from components.core.config.values import (
    BUCKET_RESERVED_PREFIXES,
    BUCKET_RESERVED_SUFFIXES,
    EXAMPLE_ACCOUNTS,
    IAM_POLICY_ARN,
    IAM_PRINCIPAL_ARN,
)

# An IPv4 octet as ipaddress reads it: 0-255, no leading zeros.
OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
ADDRESS = rf"{OCTET}\.{OCTET}\.{OCTET}\.{OCTET}"


def escape(text: str) -> str:
    """`text` literally, in a pattern both Python and JavaScript read alike."""
    return "".join(f"\\{c}" if c in ".+*?()[]{}|^$\\" else c for c in text)


# -- networks ---------------------------------------------------------------------------------

# The private ranges of values.PRIVATE_RANGES, by their first two octets.
_PRIVATE_16 = r"(?:10\." + OCTET + r"|172\.(?:1[6-9]|2[0-9]|3[01])|192\.168|100\.(?:6[4-9]|[7-9][0-9]|1[01][0-9]|12[0-7]))"


def _vpc_cidr() -> str:
    # /16 to /20 without host bits: the third octet a multiple of 2^(24 - prefix), the fourth 0.
    third = [f"(?:{'|'.join(str(n) for n in range(0, 256, 2 ** (24 - p)))})\\.0/{p}" for p in range(16, 21)]
    return rf"{_PRIVATE_16}\.(?:{'|'.join(third)})"


VPC_CIDR = _vpc_cidr()

# Addresses that are not public (Python's ipaddress: private, reserved, multicast, loopback, link-local)
# or are documentation ranges: where check_public_cidr refuses a /32.
_NOT_PUBLIC = (r"(?:0|10|127|22[4-9]|2[3-5][0-9])\.", r"169\.254\.", r"172\.(?:1[6-9]|2[0-9]|3[01])\.", r"192\.168\.",
               r"192\.0\.0\.(?:[0-7]|17[01])(?:/|\s|$)", r"192\.0\.2\.", r"198\.1[89]\.", r"198\.51\.100\.",
               r"203\.0\.113\.")
_PUBLIC = "".join(f"(?!{p})" for p in _NOT_PUBLIC)
# A public address (alone, spaces around it, it is its /32) or CIDR block; host bits and the ranges of
# blocks wider than /32 are the check's.
PUBLIC_CIDR = rf"\s*{_PUBLIC}{ADDRESS}\s*|{_PUBLIC}{ADDRESS}/(?:3[0-2]|[12]?[0-9])"

# -- IAM ----------------------------------------------------------------------------------------

_EXAMPLES = "|".join(EXAMPLE_ACCOUNTS)
PRINCIPAL_ARN = rf"(?!arn:[^:]*:iam::(?:{_EXAMPLES}):){IAM_PRINCIPAL_ARN}"
POLICY_ARN = IAM_POLICY_ARN

# -- S3 -------------------------------------------------------------------------------------------

BUCKET_NAME = ("".join(f"(?!{escape(p)})" for p in BUCKET_RESERVED_PREFIXES)
               + rf"(?!.*\.\.)(?!{ADDRESS}$)"
               + f"(?!.*(?:{'|'.join(escape(s) for s in BUCKET_RESERVED_SUFFIXES)})$)"
               + r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")

# -- node labels --------------------------------------------------------------------------------

# What components.core.limits refuses as a GPU pool's label key: the program's own (the gpucluster.io domain
# and the autoscaler's accelerator label, components.core.kube.nodepool), and kubernetes.io and k8s.io keys
# but those kubelet may set (the NodeRestriction admission plugin). The EFA label, ours on EFA pools only,
# is the rule's between the keys.
OUR_LABEL_KEYS = (r"(?!(?:[^/]*\.)?gpucluster\.io/)(?!k8s\.amazonaws\.com/accelerator$)"
                  r"(?!(?!kubelet\.kubernetes\.io/|node\.kubernetes\.io/)(?:[^/]*\.)?(?:kubernetes|k8s)\.io/)")

# -- paths in a pod -------------------------------------------------------------------------------


def mount_path_pattern(taken: Iterable[str], system: Iterable[str]) -> str:
    """values.mount_path_problem and the system paths as one pattern: an absolute path of letters, digits,
    `.`, `_`, `-` and `/`, without `.` or `..` components, neither `/` nor on (or above) a `taken` path,
    nor on or under a `system` one. Repeated and trailing slashes are the path's own business."""
    def on(path: str) -> str:  # the path, or under it
        return "/+" + "/+".join(escape(p) for p in path.strip("/").split("/")) + "(?:/|$)"

    def above(path: str) -> list[str]:  # a path the taken one is under
        parts = path.strip("/").split("/")
        return ["/+" + "/+".join(escape(p) for p in parts[:i]) + "/*$" for i in range(1, len(parts))]

    taken = list(taken)
    refused = [on(p) for p in (*taken, *system)] + [a for p in taken for a in above(p)]
    return (r"(?=/)(?=.*[^/])(?!(?:.*/)?\.\.?(?:/|$))" + "".join(f"(?!{r})" for r in refused)
            + r"[A-Za-z0-9._/-]+")


# A repository file by its path from the root: relative, no `..`, a name a ConfigMap key can be.
SCRIPT_PATH = r"(?!/)(?!(?:.*/)?\.\.(?:/|$))(?:[^/]+/)*[-._a-zA-Z0-9]+"
