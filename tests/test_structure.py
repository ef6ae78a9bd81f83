"""The codebase's shape: no import circles, the core's layers, folders a newcomer can scan.

The import graph is read from the source (every `import` and `from ... import`,
function-level ones included), not from what a test run happens to load.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("components", "bootstrap", "policy", "local")
MAX_MODULES_PER_FOLDER = 12

# Bottom-up layers of components.core: a module imports only from its own
# layer or below (components/core/__init__.py explains each).
CORE_LAYERS = {
    "problems": 0,
    "versions": 0,
    "namespaces": 0,
    "images": 0,
    "job_identity": 0,
    "cluster_access": 0,
    "goodput": 0,  # ships into the cluster: the standard library and itself only
    "fleet_token": 0,  # ships into the cluster: the standard library, itself and goodput's kubeapi
    "hardware": 1,
    "config": 2,
    "storage": 3,
    "planning": 3,
    "kube": 4,
    "teams": 4,
    "placement": 4,
    "observability": 5,
    "node_updates": 5,
    "system_nodes": 6,
    "limits": 6,
    "stack_config": 6,
    "fleet": 7,  # reads its workers' stack configs
}
# Package layers: the pure core knows nothing of resources or the CLI.
PACKAGE_LAYERS = {
    "components.core": 0,
    "components.hooks": 1,
    "components.stack": 1,
    "components.aws": 2,
    "components.kubernetes": 2,
    "policy": 2,
    "bootstrap": 3,
    # The local control plane drives the CLI and reads the core; the product never imports it.
    "local": 4,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def imported_names(path: Path, name: str) -> set[str]:
    """Every module name an `import` in this file can refer to (relative imports resolved)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
    return found


def with_parents(name: str, targets: set[str], modules: set[str]) -> set[str]:
    """`targets` and the packages whose __init__ importing them runs first (a.b.c runs a and a.b).

    The importer's own ancestors are left out: they are already running when it is imported.
    """
    out = set(targets)
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent in modules and not (name == parent or name.startswith(parent + ".")):
                out.add(parent)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (`from pkg import mod` counts as importing mod, and each
    import as importing the packages above its target)."""
    modules = source_modules()
    graph = {}
    for name, path in modules.items():
        direct = {target for target in imported_names(path, name) if target in modules and target != name}
        graph[name] = with_parents(name, direct, set(modules))
    return graph


def test_an_import_runs_the_packages_above_its_target_but_not_the_importer_s_own():
    modules = {"a", "a.b", "a.b.c", "d"}
    assert with_parents("d", {"a.b.c"}, modules) == {"a", "a.b", "a.b.c"}
    assert with_parents("a.b.x", {"a.b.c"}, modules) == {"a.b.c"}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(name: str, layers: dict[str, int], prefix: str) -> int | None:
    if not name.startswith(prefix):
        return None
    head = name[len(prefix) :].split(".")[0]
    return layers.get(head)


def package_layer(name: str) -> int | None:
    for package, layer in PACKAGE_LAYERS.items():
        if name == package or name.startswith(package + "."):
            return layer
    return None


def test_the_graph_reader_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import a\n")
    (package / "a.py").write_text("def f():\n    from pkg.b import g\n    return g\n")
    (package / "b.py").write_text("from .a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    graph = {
        module_name(path): imported_names(path, module_name(path))
        for path in sorted(package.glob("*.py"))
    }
    assert "pkg.a" in graph["pkg"]
    assert "pkg.b" in graph["pkg.a"]
    assert "pkg.a" in graph["pkg.b"]
    names = set(graph)
    pruned = {name: {t for t in targets if t in names and t != name} for name, targets in graph.items()}
    assert circles(pruned) == [["pkg.a", "pkg.b"]]  # pkg imports a, but is not on the circle


def test_no_import_circles_anywhere():
    assert circles(import_graph()) == []


def test_the_core_imports_only_its_own_layer_or_below():
    prefix = "components.core."
    offenders = []
    for name, targets in import_graph().items():
        layer = layer_of(name, CORE_LAYERS, prefix)
        if layer is None:
            continue
        for target in sorted(targets):
            target_layer = layer_of(target, CORE_LAYERS, prefix)
            if target_layer is not None and target_layer > layer:
                offenders.append(f"{name} (layer {layer}) imports {target} (layer {target_layer})")
    assert offenders == []


def test_every_core_module_has_a_layer():
    unlayered = [
        name
        for name in source_modules()
        if name.startswith("components.core.") and layer_of(name, CORE_LAYERS, "components.core.") is None
    ]
    assert unlayered == []


def test_the_pure_core_knows_nothing_of_resources_or_the_cli():
    offenders = []
    for name, targets in import_graph().items():
        layer = package_layer(name)
        if layer is None:
            continue
        for target in sorted(targets):
            target_layer = package_layer(target)
            if target_layer is not None and target_layer > layer:
                offenders.append(f"{name} imports {target}")
    assert offenders == []
    core_sources = [path for name, path in source_modules().items() if name.startswith("components.core")]
    uses_pulumi = [
        str(path.relative_to(ROOT))
        for path in core_sources
        if any(n == "pulumi" or n.startswith("pulumi_") or n.startswith("pulumi.")
               for n in imported_names(path, module_name(path)))
    ]
    assert uses_pulumi == []


@pytest.mark.parametrize("folder", sorted({path.parent for path in source_modules().values()}), ids=str)
def test_no_folder_is_too_long_to_scan(folder):
    modules = [path for path in folder.glob("*.py") if path.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES_PER_FOLDER, f"{folder.relative_to(ROOT)}: {len(modules)} modules"


@pytest.mark.parametrize("folder", sorted({path.parent for path in source_modules().values()}), ids=str)
def test_every_package_says_what_it_holds(folder):
    init = folder / "__init__.py"
    assert init.exists(), f"{folder.relative_to(ROOT)} has no __init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text()))
    assert docstring, f"{init.relative_to(ROOT)} has no docstring"
