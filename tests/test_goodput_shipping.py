"""components/core/goodput ships into the cluster as the package gpucluster_goodput (a ConfigMap on a stock Python
image, or in the job's image): every module imports only the standard library and, relatively, its own package;
torch only inside the pre-step check's functions (the job's image has it, the controller's does not)."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import ROOT

PACKAGE = ROOT / "components" / "core" / "goodput"
LAZY = {"torch"}  # imported inside functions of precheck.py only


def imports(tree: ast.AST) -> list[tuple[str, int, bool]]:
    """(module, relative level, at module level) for every import of the file."""
    top = {id(node) for node in getattr(tree, "body", [])}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level, id(node) in top))
    return found


def test_every_shipped_module_imports_the_standard_library_and_its_package_only():
    wrong = []
    for path in sorted(PACKAGE.glob("*.py")):
        for module, level, top in imports(ast.parse(path.read_text())):
            root = module.split(".")[0]
            if level or root in sys.stdlib_module_names or root == "__future__":
                continue
            if root in LAZY and not top and path.name.startswith("precheck"):
                continue
            wrong.append(f"{path.name}: {'' if top else 'in a function: '}import {module}")
    assert wrong == []


def test_the_package_imports_under_its_shipped_name_without_site_packages(tmp_path):
    """As the pod sees it: the files under gpucluster_goodput/, python -S (no site-packages, so no torch)."""
    target = tmp_path / "gpucluster_goodput"
    target.mkdir()
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    for path in PACKAGE.glob("*.py"):
        (target / path.name).write_text(path.read_text())
    code = "import importlib\n" + "".join(f"importlib.import_module('gpucluster_goodput.{m}')\n" for m in modules)
    done = subprocess.run([sys.executable, "-S", "-c", code + "print('ok')"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
