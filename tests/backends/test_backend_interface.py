"""One backend interface: every backend is a ``Backend``, and no code outside ``backends/`` asks which backend it
has (a string test on a backend's name, a ``getattr`` / ``hasattr`` / ``isinstance`` probe of a backend object), so
a behaviour that differs between backends can only live in the backend."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cosmos_helpers
from cosmos_helpers.backends import NAMES
from cosmos_helpers.backends.base import Backend
from cosmos_helpers.backends.diffusers import DiffusersBackend
from cosmos_helpers.backends.framework import FrameworkBackend
from cosmos_helpers.backends.framework_serve import FrameworkServeBackend
from cosmos_helpers.backends.vllm_omni import AsyncVllmOmniBackend, VllmOmniBackend
from cosmos_helpers.prompting.precheck import PrecheckedBackend

PACKAGE = Path(cosmos_helpers.__file__).parent
# Where naming a backend is the point: the backends themselves, the facts tables keyed by name, and the stand-ins
# of the real programs (each stands in for one backend).
OWNERS = ("backends", "protocol", "standins")
# Rules still keyed by the name a backend passes for itself; each should become a facts-table lookup or move into
# its backend. Listed so the list can only shrink.
KNOWN = {
    "precision.py": "check_for_backend(value, backend) branches on the caller's name",
    "step_cache.py": "describe / check_for_backend branch on the caller's name",
    "views/form.py": "getattr(backend, 'name'/'model') in the form's header",
}
_BACKEND_WORDS = ("backend", "runner")


def _names_a_backend(node: ast.AST) -> bool:
    """A string naming a backend, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_names_a_backend(e) for e in node.elts)


def _is_backend(node: ast.AST) -> bool:
    """An expression that reads as a backend object (``backend``, ``self.backend``, ``runner``...)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return any(word in name.lower() for word in _BACKEND_WORDS)


def _probes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_a_backend(side) for side in sides):
                found.append((node.lineno, "compares with a backend's name"))
            elif any(isinstance(s, ast.Attribute) and s.attr == "name" and _is_backend(s.value) for s in sides):
                found.append((node.lineno, "tests a backend's .name"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            given_as_name = node.func.id == "isinstance" and ast.unparse(node.args[1]) == "str"  # a name or an object
            if node.func.id in ("getattr", "hasattr", "isinstance") and _is_backend(node.args[0]) and not given_as_name:
                found.append((node.lineno, f"{node.func.id}() on a backend"))
    return found


def _outside_backends() -> dict[str, list[tuple[int, str]]]:
    probes = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in OWNERS:
            continue
        found = _probes(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            probes[relative] = found
    return probes


def test_no_code_outside_backends_asks_which_backend_it_has():
    probes = _outside_backends()
    unexpected = {path: found for path, found in probes.items() if path not in KNOWN}
    assert not unexpected, "behaviour that differs between backends belongs in the backend: " + "; ".join(
        f"{path}:{line} {what}" for path, found in unexpected.items() for line, what in found)
    assert set(KNOWN) <= set(probes), f"no longer probing, remove from KNOWN: {sorted(set(KNOWN) - set(probes))}"


def test_the_scan_finds_each_kind_of_probe():
    code = ("if backend.name == 'x': pass\nif name in ('diffusers', 'other'): pass\ngetattr(runner, 'scheduler')\n"
            "hasattr(self.backend, 'pipeline')\nisinstance(backend, int)\nisinstance(backend, str)\n"
            "if kind == 'vllm-omni': pass\nif mode == 'text2video': pass\n")
    assert [line for line, _ in _probes(ast.parse(code))] == [1, 2, 3, 4, 5, 7]


@pytest.mark.parametrize("cls", [DiffusersBackend, FrameworkBackend, VllmOmniBackend, AsyncVllmOmniBackend,
                                 FrameworkServeBackend, PrecheckedBackend])
def test_every_backend_is_a_backend(cls):
    assert issubclass(cls, Backend)


def test_several_requests_go_through_the_base_when_a_backend_has_no_batch_of_its_own(tmp_path):
    """``generate_many``'s default checks every request before the first runs."""
    from cosmos_helpers import GenerationRequest
    from cosmos_helpers.errors import ValidationError

    ran = []

    class Refusing(Backend):
        name = "refusing"

        def check(self, request):
            if request.seed == 2:
                raise ValidationError("seed", "not this one.", "use another seed.")

        def generate(self, request, *, progress=None):
            ran.append(request)

    requests = [GenerationRequest(mode="text2image", prompt="a robot", profile="tiny", seed=s) for s in (1, 2)]
    with pytest.raises(ValidationError, match="not this one"):
        Refusing().generate_many(requests)
    assert ran == []
