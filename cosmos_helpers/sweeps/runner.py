"""``sweep(notebook, grid)``: run a notebook once per parameter set, in parallel, resumably, and report.

Everything that can be wrong is checked before the first run: the grid (see :mod:`.grid`), the workers
(see :mod:`.dispatch`), the notebook's parameters, and every run folder already there (see :mod:`.runs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import ValidationError
from . import report
from ..views.pages import markdown_table
from .dispatch import LOG_DIR, Dispatch, make_slots, run_all
from .grid import load_grid, run_names, validate_sets
from .owners import holding
from .runs import SweepRun, code_digest, plan


@dataclass
class SweepResult:
    """The runs of a sweep (finished earlier ones included) and the files that summarise them.

    Displayed in a notebook it is the summary table; :meth:`table` is a pandas DataFrame when pandas is
    installed."""

    notebook: Path
    out: Path
    runs: list[SweepRun]
    files: dict[str, Path] = field(default_factory=dict)  # summary, contact_sheet, time_plot, page

    @property
    def ok(self) -> bool:
        return all(run.ok for run in self.runs)

    @property
    def failed(self) -> list[SweepRun]:
        return [run for run in self.runs if not run.ok]

    def rows(self) -> list[dict[str, Any]]:
        return report.rows(self.runs)

    def markdown(self) -> str:
        rows = self.rows()
        return markdown_table(rows, list(rows[0])) if rows else "(no runs)"

    def table(self):
        """A pandas DataFrame of :meth:`rows` when pandas is installed, else the markdown table (as text)."""
        try:
            import pandas
        except ImportError:
            return _Markdown(self.markdown())
        return pandas.DataFrame(self.rows()).set_index("run")

    def _repr_markdown_(self) -> str:
        done = sum(run.ok for run in self.runs)
        return f"**Sweep of {self.notebook.name}**: {done} of {len(self.runs)} runs ok\n\n{self.markdown()}"

    def __repr__(self) -> str:
        return f"SweepResult({self.notebook.name}: {sum(r.ok for r in self.runs)}/{len(self.runs)} ok, out={self.out})"


class _Markdown(str):
    """Text that Jupyter shows as a rendered markdown table and a terminal prints as is."""

    def _repr_markdown_(self) -> str:
        return str(self)


def sweep(notebook: str | Path, grid: Any, *, out: str | Path | None = None,
          servers: str | Sequence[str] | None = None, gpus: str | Sequence[Any] | None = None,
          jobs: int | None = None, ray: Any = None, parameters: Mapping[str, Any] | None = None,
          server_parameter: str = "server_url", output_parameter: str | None = "output_dir",
          kernel: str = "python3", log_output: bool = False, write_report: bool = True) -> SweepResult:
    """Run ``notebook`` once per parameter set of ``grid`` with papermill, each run in its own folder.

    Args:
        grid: a YAML/CSV path, a mapping ``{name: [values]}`` (every combination) or a list of sets.
        out: the sweep's folder (default ``outputs/sweeps/<notebook name>``); one sub-folder per run, named from
            its parameters, and the report files.
        servers: vLLM-Omni URLs, one worker each; each run gets its worker's URL in ``server_parameter``.
        gpus: device indices, one worker each; each run's kernel sees only its worker's GPU.
        jobs: local workers when neither is given (default 1); with ``ray`` on a cluster without GPUs, its workers.
        ray: a Ray address (``"auto"``, ``"ray://head:10001"``) or ``True`` for a local instance: each run is a Ray
            task on an actor per GPU of the cluster (the notebook and ``out`` on a filesystem every node sees).
        parameters: fixed values for every run (e.g. ``{"profile": "nano"}``); part of each run's identity.
        output_parameter: the notebook parameter that receives the run's output folder; ``None`` to run a
            notebook without one (its outputs then go wherever it writes them, and the gallery is empty).
        write_report: write ``summary.csv``, ``contact_sheet.png``, ``times.png`` and ``sweep.html`` in ``out``.

    A rerun skips finished runs, repeats failed or interrupted ones, and refuses a folder holding other
    parameters. Failures are recorded, not raised: see :attr:`SweepResult.failed`.
    """
    notebook = Path(notebook).resolve()
    sets = load_grid(grid)
    slots = make_slots(servers=servers, gpus=gpus, jobs=jobs, ray=ray)
    fixed = dict(parameters or {})
    served = any(slot.server_url for slot in slots)
    _validate(notebook, sets, fixed, served, server_parameter, output_parameter)
    out = (Path(out) if out is not None else Path("outputs", "sweeps", notebook.stem)).resolve()
    code = code_digest(notebook)
    runs = [SweepRun(name, {**fixed, **values}, out / name, notebook=str(notebook), code=code)
            for name, values in zip(run_names(sets), sets)]
    with holding(out):
        todo = plan(runs)
        if len(todo) < len(runs):
            print(f"{len(runs) - len(todo)} of {len(runs)} runs already finished in {out}; running {len(todo)}",
                  flush=True)
        dispatch = Dispatch(server_parameter=server_parameter if served else None,
                            output_parameter=output_parameter, kernel=kernel, log_output=log_output)
        run_all(todo, slots, dispatch, total=len(runs), log_dir=out / LOG_DIR)
        result = SweepResult(notebook, out, runs)
        if write_report:
            result.files = write_reports(result)
    return result


def _validate(notebook: Path, sets: list[dict[str, Any]], fixed: dict[str, Any], served: bool,
              server_parameter: str, output_parameter: str | None) -> None:
    """The grid's and the fixed parameters' names and types, and the names the sweep sets itself, on ``notebook``."""
    reserved = {output_parameter: "each run's own output folder"} if output_parameter else {}
    if served:
        reserved[server_parameter] = "each worker's server URL"
    accepted = validate_sets(notebook, sets, reserved=reserved)
    validate_sets(notebook, [fixed], reserved=reserved, what="fixed parameter")
    valid = ", ".join(accepted)
    if served and server_parameter not in accepted:
        raise ValidationError("servers", f"{notebook.name} has no {server_parameter!r} parameter to receive a "
                              f"server URL (its parameters: {valid}).",
                              "add one to its parameters cell, or name it with server_parameter= "
                              "(--server-parameter).")
    if output_parameter and output_parameter not in accepted:
        raise ValidationError("output_parameter", f"{notebook.name} has no {output_parameter!r} parameter, so "
                              f"every run would write to the same place (its parameters: {valid}).",
                              "add output_dir to its parameters cell, name another with output_parameter=, or "
                              "pass output_parameter=None (--no-output-parameter) to run it anyway.")
    for values in sets:
        both = sorted(set(values) & set(fixed))
        if both:
            raise ValidationError(f"grid parameter {both[0]!r}", "is also given as a fixed parameter.",
                                  "set it in the grid or in parameters, not both.")


def write_reports(result: SweepResult) -> dict[str, Path]:
    """The summary CSV, contact sheet, time plot and HTML page of ``result`` (see :mod:`.report`)."""
    table = report.rows(result.runs)
    files = {"summary": report.write_csv(result.out, table),
             "contact_sheet": report.write_contact_sheet(result.out, result.runs),
             "time_plot": report.write_time_plot(result.out, result.runs)}
    files["page"] = report.write_page(result.out, f"Sweep of {result.notebook.name}", result.runs, table)
    return files
