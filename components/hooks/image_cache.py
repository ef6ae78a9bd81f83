"""The images the pull-through cache copied, which would outlive its rule and bill for storage.

ECR creates a repository `<prefix>/<upstream repository>` the first time a
node pulls an image through the cache rule; deleting the rule leaves them
and their images (ECR User Guide, "Deleting a pull through cache rule": the
repositories created remain). Before the rule is deleted, this deletes the
repositories under its prefix, images and all: copies of public images,
fetched again on the next first pull.
"""

from __future__ import annotations

from collections.abc import Callable


def cached_repositories(ecr, prefix: str) -> list[str]:
    pages = ecr.get_paginator("describe_repositories").paginate()
    return sorted(r["repositoryName"] for page in pages for r in page["repositories"]
                  if r["repositoryName"].startswith(f"{prefix}/"))


def delete_cached_images(ecr, prefix: str, log: Callable[[str], None] = print) -> list[str]:
    """Delete every repository under `prefix`/ with its images; return their names."""
    deleted = []
    for name in cached_repositories(ecr, prefix):
        try:
            ecr.delete_repository(repositoryName=name, force=True)
        except Exception as err:  # gone meanwhile: what we wanted
            if (getattr(err, "response", None) or {}).get("Error", {}).get("Code") != "RepositoryNotFoundException":
                raise
        deleted.append(name)
    log(f"image cache {prefix}: deleted {len(deleted)} cached repositor{'y' if len(deleted) == 1 else 'ies'}")
    return deleted
