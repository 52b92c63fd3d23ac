"""The package's shape, read from its source with ``ast`` (nothing is imported, so this runs in well under a second).

An import cycle, a module past 450 lines, a function past 60 lines or a new top-level name fails here the day it is
written, instead of at the next review. The rules are fixed; the few places that break them today are named in
``KNOWN`` below, each with the workstream that removes it, and that list only ever shrinks.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1] / "cosmos_helpers"
ROOT = "cosmos_helpers"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
MAX_TOP_LEVEL_NAMES = 30

# An import inside a function is how a light module reaches a heavy optional dependency only when it is used, so that
# `import cosmos_helpers` and `cosmos-helpers --help` stay cheap. A package module may be imported inside a function
# only when importing it at the top would load one of these third-party packages (directly or through the module's
# own top-level imports)...
HEAVY = {"torch", "diffusers", "transformers", "modelopt", "ray", "papermill", "nbconvert", "cv2", "av", "fastapi",
         "uvicorn", "httpx", "matplotlib", "ipywidgets", "IPython", "pyarrow", "safetensors"}
# ...or when it is the entry to such a stack that itself defers the heavy import to its first use:
LAZY_TARGETS = (
    "cosmos_helpers.backends",  # each backend's own stack (torch + diffusers, httpx, a framework checkout)
    "cosmos_helpers.fast", "cosmos_helpers.parallel", "cosmos_helpers.models",  # torch code, GPU worker processes
    "cosmos_helpers.standins",  # local servers: FastAPI, uvicorn, Ray Serve
    "cosmos_helpers.controls",  # transformers depth and segmentation models
)
# ...or when the importer is the command line, which routes each subcommand to its module only when it runs.
LAZY_IMPORTERS = ("cosmos_helpers.cli", "cosmos_helpers.commands.")

# Known offenders in files that other workstreams of issue 30 own (E1: request, longvideo; E2: backends, transfer
# runner; E4: standins, fast, diffusers_transfer) or that no one owns in this round ("unassigned"). The lead empties
# each entry when the work that removes it is merged; nothing may be added, and an entry that no longer applies fails
# test_known_offenders_are_still_offenders, so the list cannot rot.
KNOWN: dict[str, set] = {
    # modules over MAX_MODULE_LINES
    "lines": set(),
    # functions over MAX_FUNCTION_LINES
    "functions": set(),
    # module imports that close a module cycle (TYPE_CHECKING and in-function imports count)
    "module_edges": set(),
    # subpackage dependencies that close a cycle between subpackages (PLAN_E section 5)
    "subpackage_edges": {
        ("cosmos_helpers.models", "cosmos_helpers.backends"),  # unassigned: models.tiny_fp8 builds through them
        ("cosmos_helpers.models", "cosmos_helpers.world"),  # unassigned: models.tiny_fp8 renders calibration clips
        ("cosmos_helpers.backends", "cosmos_helpers.standins"),  # E2: framework/vLLM clients name their stand-ins
        ("cosmos_helpers.transfer", "cosmos_helpers.standins"),  # E2: SpecRunner starts the stand-in server
    },
    # in-function imports of package modules that neither reach a HEAVY package nor route the CLI: (importer, target)
    "lazy": {
        ("cosmos_helpers.models.tiny_fp8", "cosmos_helpers.request"),  # unassigned
        ("cosmos_helpers.models.tiny_fp8", "cosmos_helpers.world.render"),  # unassigned
        ("cosmos_helpers.models.tiny_fp8", "cosmos_helpers.world.scenes"),  # unassigned
    },
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, ast.Module]:
    return {module_name(path): ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def is_package(name: str) -> bool:
    return (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()


def targets(importer: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement names: a package module, or a third-party module's dotted name."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = importer.split(".")[: len(importer.split(".")) - node.level + is_package(importer)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    known = modules()
    return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source for alias in node.names]


def statements(node: ast.AST, in_function: bool = False):
    """Every statement under ``node`` (imports and definitions are statements: expressions are not visited, which
    keeps this test fast), with whether it sits inside a function."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, ()):
            yield child, in_function
            yield from statements(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))


@cache
def all_statements() -> dict[str, list[tuple[ast.stmt, bool]]]:
    return {name: list(statements(tree)) for name, tree in modules().items()}


@cache
def imports() -> list[tuple[str, str, bool, int]]:
    """Every import in the package: (importer, imported module, inside a function, line)."""
    return [(name, target, inside, node.lineno) for name, found in all_statements().items()
            for node, inside in found if isinstance(node, (ast.Import, ast.ImportFrom))
            for target in targets(name, node)]


def package_module(target: str) -> str | None:
    """The package module an imported name lives in: ``cosmos_helpers.media.read_video`` -> ``.media``."""
    known = modules()
    while target not in known and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in known else None


@cache
def internal_edges(*, top_level_only: bool = False) -> dict[str, frozenset[str]]:
    """Package module -> the package modules it imports (TYPE_CHECKING and in-function imports count unless
    ``top_level_only``, which keeps what actually runs when the module is imported)."""
    edges: dict[str, set[str]] = {name: set() for name in modules()}
    for importer, target, inside, _ in imports():
        module = package_module(target)
        if module is not None and module != importer and not (inside and top_level_only):
            edges[importer].add(module)
    return {name: frozenset(targets) for name, targets in edges.items()}


def strongly_connected(edges: dict[str, Any]) -> list[tuple[str, ...]]:
    """The cycles of a graph, one sorted tuple per strongly connected set of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(tuple(sorted(group)))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def subpackage(name: str) -> str:
    """``cosmos_helpers.views.form`` -> ``cosmos_helpers.views``; a top-level module is its own node."""
    return ".".join(name.split(".")[:2])


def subpackage_edges() -> dict[str, set[str]]:
    """Between subpackages (and top-level modules); the root is left out: its ``TYPE_CHECKING`` block names every
    export, and nothing imports it (``test_nothing_imports_the_root_package``)."""
    edges: dict[str, set[str]] = {}
    for importer, targets in internal_edges().items():
        for target in targets:
            if subpackage(importer) != subpackage(target) and ROOT not in (importer, target):
                edges.setdefault(subpackage(importer), set()).add(subpackage(target))
    return edges


@cache
def heavy_at_the_top() -> frozenset[str]:
    return frozenset(importer for importer, target, inside, _ in imports()
                     if not inside and target.split(".")[0] in HEAVY)


@cache
def heavy(name: str) -> bool:
    """Whether importing package module ``name`` loads a HEAVY package through top-level imports."""
    direct, edges, pending, seen = heavy_at_the_top(), internal_edges(top_level_only=True), [name], set()
    while pending:
        module = pending.pop()
        if module in direct:
            return True
        seen.add(module)
        pending.extend(edges[module] - seen)
    return False


@cache
def lazy_imports() -> frozenset[tuple[str, str]]:
    """In-function imports of package modules that are neither the CLI's routing nor a way to a heavy stack."""
    found = set()
    for importer, target, inside, _ in imports():
        module = package_module(target)
        if (inside and module is not None and module != importer and not importer.startswith(LAZY_IMPORTERS)
                and not module.startswith(LAZY_TARGETS) and not heavy(module)):
            found.add((importer, module))
    return frozenset(found)


@cache
def module_lines() -> dict[str, int]:
    return {name: len(module_path(name).read_text().splitlines()) for name in modules()}


def module_path(name: str) -> Path:
    path = PACKAGE.parent / name.replace(".", "/")
    return path / "__init__.py" if is_package(name) else path.with_suffix(".py")


@cache
def long_functions() -> dict[str, int]:
    found: dict[str, int] = {}
    for name, found_here in all_statements().items():
        for node, _ in found_here:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = f"{name}.{node.name}"
                found[where] = max(found.get(where, 0), node.end_lineno - node.lineno + 1)
    return {name: lines for name, lines in found.items() if lines > MAX_FUNCTION_LINES}


def without(edges: dict[str, Any], known: set[tuple[str, str]]) -> dict[str, set[str]]:
    return {node: {other for other in targets if (node, other) not in known} for node, targets in edges.items()}


def test_no_import_cycle_between_modules():
    cycles = strongly_connected(without(internal_edges(), KNOWN["module_edges"]))
    assert not cycles, f"import cycles (in-function and TYPE_CHECKING imports count): {cycles}"


def test_no_import_cycle_between_subpackages():
    cycles = strongly_connected(without(subpackage_edges(), KNOWN["subpackage_edges"]))
    assert not cycles, f"subpackages that import each other: {cycles}"


def test_nothing_imports_the_root_package():
    """The root re-exports the package's public names; a module importing them from it would import itself."""
    offenders = [f"{importer}:{line}" for importer, target, _, line in imports() if target == ROOT and importer != ROOT]
    assert not offenders


def test_in_function_imports_of_package_modules_are_on_the_allow_list():
    """Each one reaches a heavy optional dependency or is the CLI's lazy routing; any other belongs at the top."""
    offenders = sorted(lazy_imports() - KNOWN["lazy"])
    assert not offenders, f"hoist these imports to the top of their modules: {offenders}"


def test_no_module_is_too_long():
    over = {name: n for name, n in module_lines().items() if n > MAX_MODULE_LINES and name not in KNOWN["lines"]}
    assert not over, f"split these modules (at most {MAX_MODULE_LINES} lines): {over}"


def test_no_function_is_too_long():
    over = {name: n for name, n in long_functions().items() if name not in KNOWN["functions"]}
    assert not over, f"split these functions (at most {MAX_FUNCTION_LINES} lines): {over}"


def test_the_top_level_names_are_few():
    """The root exports what a cookbook's first cell needs; the rest lives in named subpackages."""
    table = next(node.value for node in modules()[ROOT].body
                 if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "_EXPORTS")
    names = [entry.partition("=")[0] for value in ast.literal_eval(table).values() for entry in value.split()]
    assert len(names) == len(set(names)) and len(names) <= MAX_TOP_LEVEL_NAMES, sorted(names)


def test_known_offenders_are_still_offenders():
    """An entry of KNOWN that no longer applies is removed, so the allowances only ever shrink."""
    modules_edges = {(a, b) for a, targets in internal_edges().items() for b in targets}
    package_edges = {(a, b) for a, targets in subpackage_edges().items() for b in targets}
    stale = {
        "lines": {name for name in KNOWN["lines"] if module_lines().get(name, 0) <= MAX_MODULE_LINES},
        "functions": KNOWN["functions"] - set(long_functions()),
        "module_edges": KNOWN["module_edges"] - modules_edges,
        "subpackage_edges": KNOWN["subpackage_edges"] - package_edges,
        "lazy": KNOWN["lazy"] - lazy_imports(),
    }
    assert not any(stale.values()), f"remove from KNOWN: { {kind: v for kind, v in stale.items() if v} }"
