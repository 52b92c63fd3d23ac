"""Package names that load their module on first use, so importing a package (and ``cosmos-helpers --help``) stays
cheap while torch, diffusers, OpenCV and the HTTP stack wait until something needs them."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


def lazy_exports(package: str, table: Mapping[str, str], *, extra: tuple[str, ...] = ()
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package`` from ``table``: a module, relative to the package
    (``.videos``, ``..media``), maps to the names it gives, separated by spaces; ``public=name`` gives ``name`` under
    a clearer public name. ``extra`` names are defined in the package itself and listed in ``__all__`` too."""
    where: dict[str, tuple[str, str]] = {}
    for module, names in table.items():
        for entry in names.split():
            public, _, name = entry.partition("=")
            where[public] = (module, name or public)
    exported = sorted(where) + list(extra)
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = where[name]
        value = getattr(importlib.import_module(module, package), attribute)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return exported

    return __getattr__, __dir__, exported
