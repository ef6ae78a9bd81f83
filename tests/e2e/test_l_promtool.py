"""l. The spend rules, budget alerts and goodput alerts evaluated by Prometheus' own promtool (built with the local
control plane, at the Prometheus kube-prometheus-stack pins): the promtool tests of tests/test_spend.py and
tests/test_goodput_alerts.py, which `make test` cannot run without one, run here, and none may be left unrun."""

from __future__ import annotations

import os
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from local import build
from tests.conftest import ROOT


@pytest.mark.stack("dev")  # the tier orders its tests by stack; this one starts none
def test_the_spend_and_goodput_rules_pass_promtool_s_rule_tests(tmp_path):
    promtool = build.binary("promtool")
    assert promtool.is_file(), f"{promtool}: `make local` builds it"
    report = tmp_path / "promtool-tests.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "tests/test_spend.py",
                           "tests/test_goodput_alerts.py", "-k", "promtool", f"--junitxml={report}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PROMTOOL": str(promtool)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    suite = ElementTree.parse(report).getroot().find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    ran = {case.get("classname").rsplit(".", 1)[-1] for case in suite.iter("testcase")}
    print(f"promtool rule tests: {counts}")
    # Every promtool test of both files ran and passed: none xfailed (not run) or skipped.
    assert ran == {"test_spend", "test_goodput_alerts"}, ran
    assert counts["tests"] >= 8 and counts["failures"] == counts["errors"] == counts["skipped"] == 0, counts
