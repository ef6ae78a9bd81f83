"""The policy pack's entry point: `pulumi preview --policy-pack policy` runs this file.

The CLI starts `pulumi-analyzer-policy-python`, which runs
`<virtualenv>/bin/python -u -m pulumi.policy <engine> .` in this directory
(pulumi/pulumi sdk/python/dist/pulumi-analyzer-policy-python; the
virtualenv is PulumiPolicy.yaml's runtime option, here the project's
../venv); pulumi.policy runs this file with runpy, this directory first on
sys.path. The project root goes on sys.path so `policy.rules` and the
program's catalog (components.core) import as they do in the tests.

PolicyPack() serves the analyzer over gRPC and never returns: tests import
policy.pack and policy.rules, never this file.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policy.pack import PACK_NAME, policies  # noqa: E402

# The engine passes the stack's name in PULUMI_STACK (pulumi/pulumi
# sdk/go/common/resource/plugin/analyzer_plugin.go, constructEnv): it picks
# the level of the rules that are mandatory in prod.
PolicyPack(
    name=PACK_NAME,
    enforcement_level=EnforcementLevel.ADVISORY,
    policies=policies(os.environ.get("PULUMI_STACK", "")),
    description="gpucluster guardrails: IMDSv2, encryption, no public API endpoint in prod, pinned versions, "
                "EFA placement, one zone for FSx and GPUs, data kept on destroy, a GPU and cost budget, "
                "resource requests.",
)
