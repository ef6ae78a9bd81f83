"""l. The spend rules and budget alerts evaluated by Prometheus' own promtool (built with the local control plane,
at the Prometheus kube-prometheus-stack pins): tests/test_spend.py's promtool tests, which `make test` cannot run
without one, run here, and none may be left unrun."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from local import build
from tests.conftest import ROOT


@pytest.mark.stack("dev")  # the tier orders its tests by stack; this one starts none
def test_the_spend_rules_pass_promtool_s_rule_tests():
    promtool = build.binary("promtool")
    assert promtool.is_file(), f"{promtool}: `make local` builds it"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "tests/test_spend.py", "-k", "promtool", "-rx"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**_env(), "PROMTOOL": str(promtool)})
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 4 and "xfail" not in summary and "skip" not in summary, summary


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
