"""The names the fleet's two sides and the rotator agree on. Standard library only (this file ships into the
cluster); components/core/fleet/names.py re-exports them with the rest of the fleet's contract."""

from __future__ import annotations

# -- on each worker ---------------------------------------------------------------------------------------
FLEET_NAMESPACE = "gpucluster-fleet"
SERVICE_ACCOUNT = "gpucluster-multikueue"  # the manager's identity on the worker
USERNAME = f"system:serviceaccount:{FLEET_NAMESPACE}:{SERVICE_ACCOUNT}"
# The one long-lived token (a kubernetes.io/service-account-token Secret): the worker's `fleetAccess` output,
# the manager's first kubeconfig; only ever used to start the rotation, never deleted by it.
BOOTSTRAP_SECRET = f"{SERVICE_ACCOUNT}-bootstrap"
# A rotation's token is bound to an anchor Secret `<prefix><unix seconds>-<random>`, labelled so; deleting the
# anchor revokes the token (Kubernetes docs, "Managing Service Accounts": bound service account tokens). The
# rotator never lists them (its tokens may not read Secrets here: the bootstrap one is among them): the manager's
# Secret records the current and the previous anchor (the annotations below).
ANCHOR_PREFIX = f"{SERVICE_ACCOUNT}-"
ANCHOR_LABEL = "gpucluster.io/fleet-token-anchor"
# authentication.k8s.io/v1 TokenRequestSpec.expirationSeconds: "The minimum valid value for expirationSeconds
# is 10 minutes" (k8s.io/api authentication/v1 types.go).
MIN_LIFETIME_SECONDS = 600

# -- on the manager ---------------------------------------------------------------------------------------
MANAGER_NAMESPACE = "kueue-system"  # Kueue's config namespace: where it reads kubeconfig Secrets
SECRET_PREFIX = "gpucluster-fleet-"  # + the worker's MultiKueueCluster name
# Kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go MultiKueueConfigSecretKey.
KUBECONFIG_KEY = "kubeconfig"
# The seed: the kubeconfig Secret the manager's Pulumi program owns (rewritten from the worker's `fleetAccess` at
# every `up`: its server, CA and bootstrap token), which the rotator reseeds from when the worker was re-created
# or the current token is refused. Kueue never reads it (its MultiKueueCluster names the Secret above).
SEED_SUFFIX = "-seed"
ROTATED_AT_ANNOTATION = "gpucluster.io/token-rotated-at"  # RFC 3339, UTC
ANCHOR_ANNOTATION = "gpucluster.io/token-anchor"  # the anchor the current token is bound to
# The anchor of the token before it, kept (not revoked) until the next rotation: Kueue reloads the Secret
# asynchronously, and revoking the replaced token at once could make the worker look lost for a moment.
PREVIOUS_ANCHOR_ANNOTATION = "gpucluster.io/token-previous-anchor"
EXPIRES_AT_ANNOTATION = "gpucluster.io/token-expires-at"  # the TokenRequest's status.expirationTimestamp

# -- shipping ---------------------------------------------------------------------------------------------
PACKAGE = "gpucluster_fleet_token"


def secret_name(cluster: str) -> str:
    """The manager's kubeconfig Secret for a worker's MultiKueueCluster."""
    return f"{SECRET_PREFIX}{cluster}"


def seed_name(cluster: str) -> str:
    """The manager's seed Secret for a worker (`gpucluster-fleet-<cluster>-seed`)."""
    return f"{secret_name(cluster)}{SEED_SUFFIX}"


def cluster_of(secret: str) -> str:
    """The worker's MultiKueueCluster name of a kubeconfig Secret (`gpucluster-fleet-east` -> `east`)."""
    if not secret.startswith(SECRET_PREFIX) or secret == SECRET_PREFIX:
        raise ValueError(f"{secret!r} is not a fleet kubeconfig Secret ({SECRET_PREFIX}<cluster>)")
    return secret[len(SECRET_PREFIX):]


def anchor_name(unix_seconds: int, unique: str = "") -> str:
    """`gpucluster-multikueue-<seconds>[-<unique>]`: two rotations in one second (a hand rotation beside the
    CronJob's) must not collide."""
    return f"{ANCHOR_PREFIX}{unix_seconds}" + (f"-{unique}" if unique else "")


def anchor_time(name: str) -> int | None:
    """The unix seconds of an anchor's name; None for any other Secret (the bootstrap one included): the
    rotator deletes only names this accepts."""
    suffix = name[len(ANCHOR_PREFIX):] if name.startswith(ANCHOR_PREFIX) else ""
    seconds = suffix.split("-", 1)[0]
    return int(seconds) if seconds.isdigit() else None
