"""Every cookbook executed once per test run, and the executed copy shared by every check that reads it.

Several checks need an executed cookbook: that it runs to the end without an error (what nbmake checked), what
its executed copy shows in JupyterLab (``tests/browser``), what ``run-cookbooks`` and injected parameters produce
(``tests/commands/test_cli.py``, ``tests/cookbooks/test_notebooks.py``). :meth:`CookbookRuns.get` executes a
notebook the first time a test asks for it, as ``make cookbooks`` does (:func:`cosmos_helpers.notebooks.run_cookbooks`:
papermill, the notebook's folder as working directory, ``output_dir`` and ``profile`` injected, static outputs),
into a folder that every pytest-xdist worker of the run shares. A lock file per notebook makes a second asker, in
this process or another worker, wait for that run and read its record instead of running the notebook again.

The kernels run with progress bars on: ``tests/conftest.py`` silences them for the Python tests, and a kernel
started under that setting would hide the batch-run progress path (a bug there once broke ``make cookbooks``
with every test green).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from unittest.mock import patch

from filelock import FileLock

REPO = Path(__file__).resolve().parents[2]
COOKBOOKS = REPO / "cookbooks" / "cosmos3" / "generator"
# The Diffusers cookbook runs through the command line with an injected seed: the same run answers "does it run",
# "does run-cookbooks put everything in one folder" and "do injected parameters reach the notebook".
COMMAND_LINE_RUNS = {"audiovisual/run_with_diffusers.ipynb": ("-p", "seed", "3")}
WAIT_S = 540  # a run of the slowest cookbook on a loaded 2-core machine takes under two minutes


@dataclass(frozen=True)
class CookbookRun:
    """One executed cookbook: where ``run-cookbooks --out`` wrote, what it printed, and how it ended."""

    notebook: str  # relative to cookbooks/cosmos3/generator, e.g. "audiovisual/run_with_diffusers.ipynb"
    out: Path  # the run's folder (``--out``)
    executed: Path  # the executed copy
    output_dir: Path  # the notebook's injected ``output_dir``
    ok: bool
    error: str | None
    seconds: float
    printed: str = ""  # the command line's stdout and stderr, for a command-line run


def cookbook_names() -> list[str]:
    """Every cookbook, relative to ``cookbooks/cosmos3/generator`` (what ``run-cookbooks`` finds)."""
    from cosmos_helpers.notebooks import find_cookbooks

    return [path.relative_to(COOKBOOKS).as_posix() for path in find_cookbooks(REPO)]


class CookbookRuns:
    """Cookbook runs recorded under ``folder`` (one ``<key>.json`` per notebook beside its run folder)."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def get(self, notebook: str) -> CookbookRun:
        """The run of ``notebook``: read from its record, or executed now (once per test run, under its lock)."""
        key = notebook.removesuffix(".ipynb").replace("/", "__")
        record = self.folder / f"{key}.json"
        with FileLock(str(self.folder / f"{key}.lock"), timeout=WAIT_S):
            if not record.is_file():
                run = self._execute(notebook, self.folder / key)
                record.write_text(json.dumps(asdict(run), default=str))
        fields = json.loads(record.read_text())
        return CookbookRun(**{**fields, **{name: Path(fields[name]) for name in ("out", "executed", "output_dir")}})

    def _execute(self, notebook: str, out: Path) -> CookbookRun:
        relative = Path(notebook)
        executed, output_dir = out / relative, out / relative.with_suffix("")
        try:
            if notebook in COMMAND_LINE_RUNS:
                return self._command_line(notebook, out, executed, output_dir)
            from cosmos_helpers.notebooks import run_cookbooks

            with patch.dict(os.environ):
                os.environ.pop("COSMOS_HELPERS_NO_PROGRESS", None)
                (run,) = run_cookbooks(out, root=REPO, only=[notebook], gallery=False)
            return CookbookRun(notebook, out, executed, output_dir, run.ok, run.error, run.seconds)
        except Exception:  # recorded, so that the other checks of this notebook report it rather than rerun it
            return CookbookRun(notebook, out, executed, output_dir, False, traceback.format_exc(), 0.0)

    @staticmethod
    def _command_line(notebook: str, out: Path, executed: Path, output_dir: Path) -> CookbookRun:
        environment = {k: v for k, v in os.environ.items() if k != "COSMOS_HELPERS_NO_PROGRESS"}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "cosmos_helpers.cli", "run-cookbooks", "--only", notebook,
                               "--out", str(out), *COMMAND_LINE_RUNS[notebook]], capture_output=True, text=True,
                              cwd=REPO, env=environment, timeout=WAIT_S)
        printed = done.stdout + done.stderr
        error = None if done.returncode == 0 else f"run-cookbooks exited with {done.returncode}:\n{printed[-3000:]}"
        return CookbookRun(notebook, out, executed, output_dir, error is None, error, time.perf_counter() - start,
                           printed=done.stdout if error is None else printed)


def shared_folder(basetemp: Path) -> Path:
    """The run's folder that every pytest-xdist worker sees: the parent of a worker's own base folder."""
    return (basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp) / "cookbook-runs"
