"""The AWS account before `pulumi up`: state backend, OIDC role, preflight checks, quotas, identity, version pins."""
