"""One sweep run's folder and manifest, and the resume rules that decide what a rerun of a sweep does.

A run lives in ``<out>/<run name>/``: the executed notebook, the notebook's own outputs (``outputs/``, given
as its ``output_dir`` when it has one) and ``sweep-run.json``, the run manifest (notebook, parameters,
status, error, timing, worker). The manifest is written atomically when the run starts (``running``) and
when it ends (``ok`` or ``failed``), so a folder always says what happened to it:

* ``ok`` with the same notebook and parameters: finished, skipped by a rerun;
* ``failed``, or ``running`` left by an interrupted sweep: run again; the earlier attempt's folder is moved
  to ``<out>/.attempts/`` first, so nothing it produced is lost or mixed with the new attempt;
* ``running`` by a sweep process that is still alive (its pid on this host, or any process on another host; this
  process while the run is still in flight here): refused, so two sweeps never run the same folder at once; a
  second sweep into a folder another one is working in is refused before it plans (:mod:`.owners`);
* another notebook, the same notebook with other code (its code cells' digest), or other parameters (a
  renamed grid value, an edited fixed parameter), or a non-empty folder without a manifest: refused before
  anything runs, because reusing or overwriting it would mislabel someone's results.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import media
from ..errors import OutputExistsError
from .grid import canonical
from .owners import alive

SCHEMA = "cosmos-helpers/sweep-run/v1"
MANIFEST_NAME = "sweep-run.json"
OUTPUTS = "outputs"
ATTEMPTS = ".attempts"


@dataclass
class SweepRun:
    """One parameter set of a sweep and what became of it."""

    name: str
    parameters: dict[str, Any]
    folder: Path
    notebook: str = ""
    code: str = ""                   # digest of the notebook's code cells (code_digest)
    status: str = "pending"          # pending | running | ok | failed
    seconds: float | None = None
    error: str | None = None
    worker: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1
    started: str | None = None
    finished: str | None = None
    reused: bool = False             # finished by an earlier invocation of the sweep, skipped this time
    owner: dict[str, Any] = field(default_factory=dict)  # the sweep process running it: host and pid

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST_NAME

    @property
    def executed(self) -> Path:
        return self.folder / Path(self.notebook).name

    @property
    def outputs(self) -> Path:
        return self.folder / OUTPUTS

    def write_manifest(self) -> Path:
        data = {key: value for key, value in asdict(self).items() if key not in ("folder", "reused")}
        text = json.dumps({"schema": SCHEMA, **data, "executed": self.executed.name}, indent=2, default=str)
        return media.write_bytes_atomic(self.manifest_path, text.encode("utf-8"), overwrite=True)


def code_digest(notebook: str | Path) -> str:
    """A digest of the notebook's code cells (prose and outputs aside): what a finished run's results depend on
    besides its parameters, so an edited notebook's earlier runs are not taken for its own."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", [])
    code = ["".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code"]
    return hashlib.sha256(json.dumps(code).encode()).hexdigest()[:16]


def read_run_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None


def plan(runs: list[SweepRun]) -> list[SweepRun]:
    """Mark finished runs as reused and return the ones to execute; refuse any folder that belongs to another
    notebook or parameter set. Checks every run before it changes anything."""
    todo: list[tuple[SweepRun, dict[str, Any] | None]] = []
    for run in runs:
        manifest = read_run_manifest(run.folder)
        if manifest is None:
            if run.folder.exists() and any(run.folder.iterdir()):
                raise OutputExistsError(
                    f"{run.folder} has files but no {MANIFEST_NAME}: it was not made by this sweep. Move it away "
                    "or choose another output folder.")
            todo.append((run, None))
            continue
        same_notebook = Path(str(manifest.get("notebook"))).name == Path(run.notebook).name  # survives a moved checkout
        code = manifest.get("code")
        if same_notebook and code and run.code and code != run.code and manifest.get("status") == "ok":
            raise OutputExistsError(
                f"{run.folder} holds a run of an earlier version of {Path(run.notebook).name} (its code cells have "
                "changed since); it is never reused for the edited notebook. Choose another output folder (or move "
                "that run away).")
        if not same_notebook or canonical(manifest.get("parameters") or {}) != canonical(run.parameters):
            raise OutputExistsError(
                f"{run.folder} holds a run of {Path(str(manifest.get('notebook'))).name} with parameters "
                f"{manifest.get('parameters')}, not of {Path(run.notebook).name} with {run.parameters}; it is never "
                "reused for another request. Choose another output folder (or move that run away).")
        owner = manifest.get("owner") or {}
        if manifest.get("status") == "running" and owner and alive(owner, run.folder):
            raise OutputExistsError(
                f"{run.folder} is being run by another sweep (pid {owner.get('pid')} on {owner.get('host')}); wait "
                "for it to finish, or use another output folder. If that sweep is gone (its machine restarted), "
                f"move the folder into {ATTEMPTS}/ and run again.")
        if manifest.get("status") == "ok":
            run.status, run.reused = "ok", True
            for key in ("seconds", "error", "worker", "attempt", "started", "finished"):
                setattr(run, key, manifest.get(key, getattr(run, key)))
            continue
        todo.append((run, manifest))
    for run, manifest in todo:
        if manifest is not None:  # a failed or interrupted attempt: keep it aside, start clean
            run.attempt = int(manifest.get("attempt") or 1) + 1
            _set_aside(run, manifest)
    return [run for run, _ in todo]


def _set_aside(run: SweepRun, manifest: dict[str, Any]) -> None:
    archive = run.folder.parent / ATTEMPTS
    archive.mkdir(exist_ok=True)
    target = archive / f"{run.name}.attempt{run.attempt - 1}.{manifest.get('status', 'unknown')}"
    suffix = 1
    while target.exists():
        suffix += 1
        target = target.with_name(f"{target.name.split('~')[0]}~{suffix}")
    shutil.move(str(run.folder), str(target))
