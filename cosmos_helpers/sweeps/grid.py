"""A sweep's grid: the parameter sets to run (YAML, CSV or Python), checked against the notebook's tagged
``parameters`` cell (papermill's ``inspect_notebook``) before anything runs.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import itertools
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import ValidationError

MAX_NAME = 96
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=,-]+")


def load_grid(grid: Any) -> list[dict[str, Any]]:
    """The parameter sets of ``grid``: a ``.yaml``/``.yml``/``.csv`` path, a mapping ``{name: [values]}`` (every
    combination, in order; a non-list value is the only one) or a list of ``{name: value}`` sets. A CSV has one set
    per row under a header row, its cells read as YAML scalars (``'7'`` in quotes is a text)."""
    source = "grid"
    if isinstance(grid, (str, Path)):
        source = str(grid)
        grid = _read_file(Path(grid))
    if isinstance(grid, Mapping):
        sets = _product(grid, source)
    elif isinstance(grid, Sequence) and not isinstance(grid, (str, bytes)):
        sets = [_set(entry, f"{source}[{index}]") for index, entry in enumerate(grid)]
    else:
        raise ValidationError(source, f"is a {type(grid).__name__}, not a grid.",
                              "give a mapping {name: [values]}, a list of {name: value} sets, or a YAML/CSV file.")
    if not sets:
        raise ValidationError(source, "is empty: there is nothing to run.",
                              "give at least one value for every parameter (an empty list empties the product).")
    _refuse_duplicates(sets, source)
    return sets


def _read_file(path: Path) -> Any:
    if not path.is_file():
        raise ValidationError("grid", f"{path} is not a file.", "give the path of a .yaml, .yml or .csv grid.")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _read_csv(text, path)
    if suffix in (".yaml", ".yml", ".json"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValidationError(str(path), f"is not valid YAML: {exc}", "fix the file's syntax.") from None
        if data is None:
            raise ValidationError(str(path), "is empty: there is nothing to run.", "list the parameter values.")
        return data
    raise ValidationError("grid", f"{path.name} has an unknown suffix {suffix!r}.", "use .yaml, .yml or .csv.")


def _read_csv(text: str, path: Path) -> list[dict[str, Any]]:
    import yaml

    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not rows:
        raise ValidationError(str(path), "is empty: there is nothing to run.", "add a header row and one row per run.")
    header = [name.strip() for name in rows[0]]
    if any(not name for name in header) or len(set(header)) != len(header):
        raise ValidationError(str(path), f"header {header} has an empty or repeated column name.",
                              "name each column once after a notebook parameter.")
    sets = []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValidationError(f"{path} line {line}", f"has {len(row)} cells, the header has {len(header)}.",
                                  "give one value per column.")
        for name, cell in zip(header, row):
            if not cell.strip():
                raise ValidationError(f"{path} line {line}, column {name!r}", "is empty.",
                                      "give a value (write null for None, '' for an empty text).")
        sets.append({name: yaml.safe_load(cell) for name, cell in zip(header, row)})
    return sets


def _product(grid: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    names = list(_set(grid, source))
    if not names:
        raise ValidationError(source, "is empty: there is nothing to run.",
                              "map each parameter to its values, e.g. {seed: [0, 1]}.")
    choices = [list(value) if isinstance(value, (list, tuple)) else [value] for value in grid.values()]
    return [dict(zip(names, combo)) for combo in itertools.product(*choices)]


def _set(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, Mapping):
        raise ValidationError(where, f"is {entry!r}, not a parameter set.", "write each run as {name: value, ...}.")
    for name in entry:
        if not isinstance(name, str) or not name:
            raise ValidationError(f"{where}: {name!r}", "is not a parameter name.", "use the notebook's names.")
    return dict(entry)


def canonical(parameters: Mapping[str, Any]) -> str:
    """One text per parameter set, independent of key order and of tuple-vs-list: identity for resuming."""
    return json.dumps(parameters, sort_keys=True, default=str, separators=(",", ":"))


def _refuse_duplicates(sets: list[dict[str, Any]], source: str) -> None:
    seen: dict[str, int] = {}
    for index, values in enumerate(sets):
        if (first := seen.setdefault(canonical(values), index)) != index:
            raise ValidationError(source, f"runs {values} twice (sets {first} and {index}).",
                                  "list every parameter set once.")


_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "list": (list, tuple),
          "dict": (dict,), "tuple": (list, tuple)}


def notebook_parameters(notebook: str | Path) -> dict[str, dict[str, Any]]:
    """papermill's view of the tagged ``parameters`` cell; a notebook without one cannot be swept."""
    import papermill

    notebook = Path(notebook)
    if not notebook.is_file():
        raise ValidationError("notebook", f"{notebook} does not exist.", "give the path of a .ipynb file.")
    found = papermill.inspect_notebook(str(notebook))
    if not found:
        raise ValidationError("notebook", f"{notebook.name} has no cell tagged 'parameters' (or it is empty).",
                              "tag the cell that sets the notebook's parameters with 'parameters'.")
    return found


def expected_type(spec: Mapping[str, Any]) -> tuple[str, tuple[type, ...]] | None:
    """The type a parameter's value must have: its annotation, else its default literal's; ``None``: any."""
    declared = str(spec.get("inferred_type_name") or "None")
    if declared in _TYPES:
        return declared, _TYPES[declared]
    try:
        default = ast.literal_eval(str(spec.get("default")))
    except (ValueError, SyntaxError):
        return None  # an expression (a Path(...), a call): nothing to infer
    name = type(default).__name__
    return (name, _TYPES[name]) if name in _TYPES else None


def validate_sets(notebook: str | Path, sets: Iterable[Mapping[str, Any]], *,
                  reserved: Mapping[str, str] | None = None, what: str = "grid parameter") -> dict[str, dict[str, Any]]:
    """Check every set's names and value types against ``notebook``; returns its parameters.

    ``reserved`` maps names the sweep sets itself (``output_dir``, the server URL) to why: the grid may not
    set them. ``what`` names the values in errors (grid or fixed parameters)."""
    accepted = notebook_parameters(notebook)
    valid = ", ".join(accepted)
    for values in sets:
        for name, value in values.items():
            if name in (reserved or {}):
                raise ValidationError(f"{what} {name!r}", f"is set by the sweep itself ({reserved[name]}).",
                                      f"do not set {name!r} yourself.")
            if name not in accepted:
                raise ValidationError(f"{what} {name!r}", f"is not a parameter of {Path(notebook).name}.",
                                      f"use one of: {valid}.")
            expected = expected_type(accepted[name])
            if expected is None or value is None:
                continue
            type_name, types = expected
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ValidationError(f"{what} {name!r}",
                                      f"{value!r} is a {type(value).__name__}; the notebook's default "
                                      f"({accepted[name]['default']}) is a {type_name}.",
                                      f"give {name} {type_name} values.")
    return accepted


def _text(value: Any) -> str:
    plain = isinstance(value, (int, float, str)) and not isinstance(value, bool)
    return str(value) if plain else json.dumps(value, sort_keys=True, default=str)


def run_name(parameters: Mapping[str, Any]) -> str:
    """A folder name that reads as the set (``guidance=3.5,seed=0``, keys sorted): stable across runs and
    filesystem-safe. When sanitising lost information, or the name is long, a short hash of the set is
    appended so two sets never share a folder."""
    if not parameters:
        return "defaults"
    readable = ",".join(f"{name}={_text(parameters[name])}" for name in sorted(parameters))
    safe = _UNSAFE.sub("_", readable).strip("._") or "run"
    if safe == readable and len(safe) <= MAX_NAME:
        return safe
    digest = hashlib.sha1(canonical(parameters).encode()).hexdigest()[:8]
    return f"{safe[:MAX_NAME].rstrip('._')}-{digest}"


def run_names(sets: Sequence[Mapping[str, Any]]) -> list[str]:
    """:func:`run_name` of each set; names equal up to letter case (one folder on macOS/Windows) get hashes."""
    names = [run_name(values) for values in sets]
    folded = [name.lower() for name in names]
    for index, values in enumerate(sets):
        if folded.count(folded[index]) > 1:
            names[index] = f"{names[index]}-{hashlib.sha1(canonical(values).encode()).hexdigest()[:8]}"
    return names
