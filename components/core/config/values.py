"""Values AWS and Kubernetes accept, as patterns and checks (each returns why not, or None).

Shared by the schema's field types and by the verbs that take the same
values on the command line (`bootstrap backend --bucket`). Pure, with no
import of our own: the schema builds on it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
CLUSTER_NAME = r"[0-9A-Za-z][A-Za-z0-9_-]*"  # EKS CreateCluster name pattern
RESERVATION_ID = r"cr-[0-9a-f]{17}"
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
S3_PREFIX = r"[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*/"
AZ_NAME = r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]"
K8S_LABEL_KEY = r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
K8S_LABEL_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
# AWS tag keys: 1-128 characters, not starting with aws: (reserved for AWS).
AWS_TAG_KEY = r"(?!aws:)[\w .:/=+@-]{1,128}"
ADDON_VERSION = r"v\d+\.\d+\.\d+(-[a-z0-9]+)*-eksbuild\.\d+"  # v1.20.4-eksbuild.1
# AL2023 AMI release of a managed node group: <Kubernetes x.y.z>-<build date>
# (EKS API NodeGroup.releaseVersion; the SSM .../recommended/release_version parameter).
AMI_RELEASE = r"\d+\.\d+\.\d+-\d{8}"


# -- networks ------------------------------------------------------------------

def check_cidr(value: str) -> str | None:
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        try:
            network = ipaddress.IPv4Network(value, strict=False)
        except ValueError:
            return f"must be an IPv4 CIDR block such as 10.0.0.0/16 ({exc})"
        address = value.split("/")[0]
        return f"has host bits set: the network is {network}, the address alone {address}/32"
    return None


PRIVATE_RANGES = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                          "100.64.0.0/10"))


def check_vpc_cidr(value: str) -> str | None:
    """A VPC range: private, /16 to /20 (a private and a public subnet per zone, and enough pod IPs
    for the VPC CNI on 8-GPU nodes)."""
    if reason := check_cidr(value):
        return reason
    net = ipaddress.IPv4Network(value)
    reasons = []
    if not any(net.subnet_of(p) for p in PRIVATE_RANGES):
        reasons.append("must be a private range (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10)")
    if not 16 <= net.prefixlen <= 20:
        reasons.append("prefix length must be from /16 to /20")
    return "; ".join(reasons) or None


# RFC 5737: reserved for documentation, never routed. EKS rejects them in
# publicAccessCidrs, and nobody deploys from one.
DOCUMENTATION_RANGES = tuple(ipaddress.IPv4Network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))


def check_public_cidr(value: str) -> str | None:
    """A CIDR the public EKS endpoint can see traffic from: public, not a documentation range."""
    if reason := check_cidr(value):
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


# -- IAM -------------------------------------------------------------------------

# AWS's documentation example accounts: a principal there is a copied example.
EXAMPLE_ACCOUNTS = ("123456789012", "111122223333", "444455556666")

# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns
_IAM_NAME = r"[A-Za-z0-9_+=,.@-]"  # IAM names and paths: ASCII only
IAM_PRINCIPAL_ARN = rf"arn:aws(-cn|-us-gov)?:iam::[0-9]{{12}}:(role|user)(/{_IAM_NAME}+)*/{_IAM_NAME}{{1,128}}"


def check_principal_arn(value: str) -> str | None:
    """An IAM role or user ARN. Any account is valid (EKS access entries take
    principals of other accounts); whether it exists is preflight's question."""
    if not re.fullmatch(IAM_PRINCIPAL_ARN, value):
        if ":sts::" in value and ":assumed-role/" in value:
            return ("is a session (assumed-role) ARN; give the role's IAM ARN, arn:aws:iam::<account>:role/<name> "
                    "(`python -m bootstrap whoami` prints it)")
        return "must be an IAM role or user ARN, arn:aws:iam::<12-digit account>:role/<name> or :user/<name>"
    account = value.split(":")[4]
    if account in EXAMPLE_ACCOUNTS:
        return f"is in {account}, an AWS documentation example account; use a role of your own account"
    return None


# IAM User Guide, "IAM identifiers" (ARNs): a managed policy is AWS's (account `aws`) or an account's,
# arn:<partition>:iam::<aws|account>:policy/<path/><name>.
IAM_POLICY_ARN = rf"arn:aws(-cn|-us-gov)?:iam::(aws|[0-9]{{12}}):policy/({_IAM_NAME}+/)*{_IAM_NAME}{{1,128}}"
# IAM User Guide, "IAM and AWS STS quotas": managed policies attached to a role, 10 by default
# (adjustable to 25); the jobs' role attaches only the stack's, its S3 access being an inline policy.
ROLE_MANAGED_POLICIES_MAX = 10


def check_policy_arn(value: str) -> str | None:
    """An IAM managed policy ARN (AWS's or an account's)."""
    if re.fullmatch(IAM_POLICY_ARN, value):
        return None
    return ("must be an IAM managed policy ARN, arn:aws:iam::aws:policy/<name> or "
            "arn:aws:iam::<12-digit account>:policy/<name>")


def policy_list_problems(arns: Iterable[str]) -> list[tuple[int, str]]:
    """(index, why) for repeated entries, and (-1, why) for more than IAM attaches to a role by default."""
    items = list(arns)
    out = [(i, f"repeats entry [{items.index(arn)}]") for i, arn in enumerate(items) if items.index(arn) != i]
    if len(items) > ROLE_MANAGED_POLICIES_MAX:
        out.append((-1, f"has {len(items)} entries; IAM attaches at most {ROLE_MANAGED_POLICIES_MAX} managed "
                        "policies to a role by default (IAM quotas); combine them into fewer policies"))
    return out


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


# -- S3 ------------------------------------------------------------------------------
# S3 User Guide, "General purpose bucket naming rules"
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).

BUCKET_NAME_MAX = 63
_BUCKET_CHARS = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")
BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
BUCKET_NAME_ALLOWED = ("3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit "
                       "(S3 general purpose bucket naming rules)")


def bucket_name_problem(name: str) -> str | None:
    """Why S3 would refuse `name` as a general purpose bucket name, or None."""
    if not 3 <= len(name) <= BUCKET_NAME_MAX:
        return f"must be 3 to 63 characters long, not {len(name)}"
    if not _BUCKET_CHARS.fullmatch(name):
        return f"must be {BUCKET_NAME_ALLOWED}"
    if ".." in name:
        return "must not contain two adjacent dots"
    try:
        ipaddress.IPv4Address(name)
        return "must not be formatted as an IP address"
    except ValueError:
        pass
    for prefix in BUCKET_RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"must not start with {prefix!r} (reserved by S3)"
    for suffix in BUCKET_RESERVED_SUFFIXES:
        if name.endswith(suffix):
            return f"must not end with {suffix!r} (reserved by S3)"
    return None


# -- counts ----------------------------------------------------------------------------

_COUNT_SUFFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGT]?)\s*$", re.IGNORECASE)


def parse_quantity(text: str | float) -> float:
    """7e9, "70B", "1.5T", "13b", "500M" -> float. ValueError when it is none of these."""
    if isinstance(text, (int, float)):
        return float(text)
    match = _COUNT.match(text)
    if not match:
        raise ValueError(f"not a quantity: {text!r}")
    number, suffix = match.groups()
    return float(number) * _COUNT_SUFFIXES[suffix.upper()]


# -- container images -------------------------------------------------------------------
# The OCI reference grammar as the container tools parse it (distribution/reference,
# reference.go and regexp.go; the OCI distribution spec's repository name rule):
#   reference := name [ ":" tag ] [ "@" digest ]
#   name      := [ domain "/" ] path-component ( "/" path-component )*
#   domain    := host [ ":" port ], host a DNS name (letters, digits, hyphens, dots) or [IPv6]
#   path-component := [a-z0-9]+ ( ( [._] | "__" | "-"+ ) [a-z0-9]+ )*
#   tag       := [\w][\w.-]{0,127}
#   digest    := algorithm ":" hex, algorithm [A-Za-z][A-Za-z0-9]* ( [+._-] [A-Za-z][A-Za-z0-9]* )*
# The first component is a registry when it has a "." or ":" or is "localhost"
# (reference.ParseNormalizedNamed). A name is at most 255 characters.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*))"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?")
NAME_MAX = 255
SHA256_HEX = 64
# For editors (JSON Schema, JavaScript regex): what image_problem accepts, a reference pinned to a tag or
# digest, not `latest`, its name at most NAME_MAX characters, a sha256 digest of SHA256_HEX hex digits.
_PINNED_DIGEST = rf"(?:sha256:[0-9a-fA-F]{{{SHA256_HEX}}}|(?!sha256:){_DIGEST})"
IMAGE_PINNED_PATTERN = (rf"(?!.*:latest$)(?=[^@]{{1,{NAME_MAX}}}(?::{_TAG})?(?:@|$))"
                        rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
                        rf"(?::{_TAG}(?:@{_PINNED_DIGEST})?|@{_PINNED_DIGEST})")


def image_problem(reference: str) -> str | None:
    """Why a container runtime would refuse `reference`, or why we do (unpinned, `latest`); None if fine."""
    match = IMAGE_REFERENCE.fullmatch(reference)
    if match is None or _misread_domain(reference, match):
        lowered = reference.lower()
        hint = ""
        if lowered != reference and IMAGE_REFERENCE.fullmatch(_lower_path(reference)):
            hint = " (repository names are lowercase)"
        return ("is not an image reference ([registry[:port]/]repository[:tag][@digest], lowercase repository)"
                + hint)
    if len(match["name"]) > NAME_MAX:
        return f"has a name of {len(match['name'])} characters; at most {NAME_MAX}"
    tag, digest = match["tag"], match["digest"]
    if digest is not None:
        algorithm, hex_ = digest.split(":", 1)
        if algorithm == "sha256" and len(hex_) != SHA256_HEX:
            return f"has a sha256 digest of {len(hex_)} hex digits; sha256 has {SHA256_HEX}"
    if tag is None and digest is None:
        return "is not pinned: give a version tag (repo:1.2.0) or a digest (repo@sha256:...)"
    if tag == "latest" and digest is None:
        return "is tagged latest: pin a version tag or digest, so a later run gets the same image"
    return None


def _misread_domain(reference: str, match: re.Match) -> bool:
    """`repo:1.0` parses as a domain "repo:1" without a path only when there is a slash; a first component
    with a port or dot but no slash after it is a repository with a tag, which the grammar already read."""
    domain = match["domain"]
    return domain is not None and "/" not in reference.split("@", 1)[0][len(domain):][:1]


def _lower_path(reference: str) -> str:
    first, _, rest = reference.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}/{rest.lower()}"
    return reference.lower()


# -- paths in a pod -----------------------------------------------------------------------

def mount_path_problem(path: str, taken: Iterable[str] = ()) -> str | None:
    """Why `path` cannot be where a volume is mounted in our pods: not absolute, `/`, `..`, or on a path
    another of our volumes uses (`taken`: /dev/shm and the like)."""
    if not path.startswith("/"):
        return "must be an absolute path (/fsx)"
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        return "must not contain . or .. components"
    if not parts:
        return "must not be / (the container's root)"
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", path):
        return "may contain letters, digits, ., _, - and / only"
    normal = "/" + "/".join(parts)
    for other in taken:
        if normal == other or normal.startswith(other + "/") or other.startswith(normal + "/"):
            return f"overlaps {other}, which the pods mount themselves"
    return None


# -- the API endpoint's allow list ---------------------------------------------------------

# EKS: at most 40 public endpoint CIDR ranges per cluster (EKS User Guide, "Amazon EKS service
# quotas": Public endpoint access CIDR ranges per cluster, 40, not adjustable).
PUBLIC_ACCESS_CIDRS_MAX = 40


def with_prefix_length(value: object) -> object:
    """A bare address is its /32: what one means by listing it (EKS refuses a CIDR without one)."""
    if isinstance(value, str) and "/" not in value.strip() and value.strip():
        try:
            ipaddress.IPv4Address(value.strip())
        except ValueError:
            return value
        return f"{value.strip()}/32"
    return value


def cidr_list_problems(cidrs: Iterable[str]) -> list[tuple[int, str]]:
    """(index, why) for the entries of an allow list that repeat or lie inside another entry, and its length."""
    items = list(cidrs)
    out: list[tuple[int, str]] = []
    nets = [ipaddress.IPv4Network(c) for c in items]
    for i, net in enumerate(nets):
        for j, other in enumerate(nets[:i]):
            if net == other:
                out.append((i, f"repeats entry [{j}] ({other})"))
                break
            if net.subnet_of(other) or other.subnet_of(net):
                wider = other if net.subnet_of(other) else net
                out.append((i, f"overlaps entry [{j}] ({other}); keep only {wider}"))
                break
    if len(items) > PUBLIC_ACCESS_CIDRS_MAX:
        out.append((-1, f"has {len(items)} entries; EKS accepts at most {PUBLIC_ACCESS_CIDRS_MAX}"))
    return out
