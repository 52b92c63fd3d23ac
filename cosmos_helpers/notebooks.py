"""Executing the cookbooks with papermill: one output folder, executed copies, media, and a summary.

Each notebook runs in its own folder (so its ``assets/`` paths work) with ``output_dir``, ``profile`` and any extra
parameters injected; ``COSMOS_HELPERS_STATIC=1`` makes the previews static HTML, so the copies read well as files.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable
from unittest.mock import patch

from .errors import OutputExistsError
from .gallery import write_gallery
from .media import write_bytes_atomic
from .presets import DEFAULT_PROFILE

COOKBOOK_DIR = Path("cookbooks") / "cosmos3" / "generator"


@dataclass
class NotebookRun:
    notebook: str
    executed: str
    output_dir: str
    seconds: float
    ok: bool
    error: str | None = None


SKIPPED_FOLDERS = frozenset({"outputs", ".ipynb_checkpoints"})  # what runs leave beside the cookbooks


def repo_root(start: str | Path | None = None) -> Path:
    """The checkout that holds ``cookbooks/``: searched upward from ``start`` (or cwd), then from this file."""
    for origin in (Path(start or Path.cwd()).resolve(), Path(__file__).resolve().parent):
        for folder in (origin, *origin.parents):
            if (folder / COOKBOOK_DIR).is_dir():
                return folder
    raise FileNotFoundError(f"no {COOKBOOK_DIR} folder above {start or Path.cwd()}; run from the repository")


def find_cookbooks(root: str | Path | None = None, only: Iterable[str] = ()) -> list[Path]:
    """The cookbooks under ``cookbooks/``, not the executed copies runs leave in ``outputs/``, nor checkpoints."""
    base = repo_root(root) / COOKBOOK_DIR
    notebooks = sorted(p for p in base.rglob("*.ipynb")
                       if not SKIPPED_FOLDERS.intersection(p.relative_to(base).parts[:-1]))
    patterns = list(only)
    return [p for p in notebooks if not patterns or any(pattern in str(p.relative_to(base)) for pattern in patterns)]


def execute_notebook(notebook: str | Path, executed: str | Path, parameters: dict[str, Any], *,
                     kernel: str = "python3", log_output: bool = False) -> tuple[float, str | None]:
    """Run one notebook with papermill in its own folder into ``executed``; returns ``(seconds, error)``, a failure
    as the last lines of the cell's traceback (not raised: batch callers record it and carry on)."""
    import papermill

    notebook = Path(notebook)
    start, error = time.perf_counter(), None
    try:
        papermill.execute_notebook(str(notebook), str(executed), parameters=parameters, cwd=str(notebook.parent),
                                   kernel_name=kernel, progress_bar=False, log_output=log_output)
    except Exception as exc:  # papermill raises PapermillExecutionError with the cell's traceback
        error = "\n".join(str(exc).strip().splitlines()[-6:]) or type(exc).__name__
    return time.perf_counter() - start, error


def run_cookbooks(out: str | Path, *, root: str | Path | None = None, profile: str = DEFAULT_PROFILE,
                  parameters: dict[str, Any] | None = None, only: Iterable[str] = (), kernel: str = "python3",
                  gallery: bool = True, log_output: bool = False) -> list[NotebookRun]:
    """Execute every cookbook into ``out``; failures are recorded, not raised: one must not hide the others' results."""
    import papermill

    out = Path(out).resolve()
    base = repo_root(root) / COOKBOOK_DIR
    planned = []
    for notebook in find_cookbooks(root, only):  # every notebook is checked before any runs
        relative = notebook.relative_to(base)
        accepted = set(papermill.inspect_notebook(str(notebook)))
        injected = {"output_dir": str(out / relative.with_suffix("")), "profile": profile, **(parameters or {})}
        injected = {k: v for k, v in injected.items() if k in accepted}
        _check_earlier_run(out / relative, injected, overwrite=(parameters or {}).get("overwrite") is True)
        planned.append((notebook, relative, injected))
    out.mkdir(parents=True, exist_ok=True)
    runs: list[NotebookRun] = []
    with patch.dict(os.environ, {"COSMOS_HELPERS_STATIC": "1"}):  # restored afterwards, as it was
        for notebook, relative, injected in planned:
            executed = out / relative
            output_dir = out / relative.with_suffix("")
            executed.parent.mkdir(parents=True, exist_ok=True)
            print(f"running {relative} ({', '.join(f'{k}={v!r}' for k, v in injected.items())})", flush=True)
            seconds, error = execute_notebook(notebook, executed, injected, kernel=kernel, log_output=log_output)
            runs.append(NotebookRun(str(relative), str(executed), str(output_dir), seconds, error is None, error))
            print(f"  {'ok' if error is None else 'FAILED'} in {runs[-1].seconds:.1f} s -> {executed}", flush=True)
    _write_summary(out / "summary.json", runs)
    if gallery:
        print(f"gallery: {write_gallery(out)}")
    return runs


def _check_earlier_run(executed: Path, injected: dict[str, Any], *, overwrite: bool) -> None:
    """Refuse, before anything runs, to replace an earlier run's executed copy made with other parameters (its
    outputs would then be refused) unless the run overwrites; ``overwrite`` itself is no difference."""
    if overwrite or not executed.is_file():
        return
    try:
        earlier = json.loads(executed.read_text(encoding="utf-8"))["metadata"]["papermill"]["parameters"]
    except (KeyError, TypeError, json.JSONDecodeError):
        return
    earlier = {k: v for k, v in earlier.items() if k != "overwrite"}
    if earlier != json.loads(json.dumps({k: v for k, v in injected.items() if k != "overwrite"}, default=str)):
        raise OutputExistsError(f"{executed} was run with {earlier}; this run has {injected}, and would replace it "
                                "and refuse its outputs. Use another output folder, or pass the parameter "
                                "overwrite=True (-p overwrite True) to generate them again.")


def _write_summary(path: Path, runs: list[NotebookRun]) -> None:
    """The summary of every notebook run into this folder: this run's entries replace those notebooks' earlier ones."""
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        earlier = []
    done = {run.notebook for run in runs}
    merged = [entry for entry in earlier if isinstance(entry, dict) and isinstance(entry.get("notebook"), str)
              and entry["notebook"] not in done]  # an entry naming no notebook is no record of a run
    merged += [asdict(run) for run in runs]
    write_bytes_atomic(path, json.dumps(sorted(merged, key=lambda e: e["notebook"]), indent=2).encode(),
                       overwrite=True)


def summary_table(runs: list[NotebookRun]) -> str:
    lines = ["| notebook | result | seconds |", "| --- | --- | ---: |"]
    lines += [f"| {run.notebook} | {'ok' if run.ok else 'FAILED'} | {run.seconds:.1f} |" for run in runs]
    return "\n".join(lines)
