"""Cookbooks are stored clean, are parameterised for papermill, and run end to end with injected values."""

import json
from pathlib import Path

import nbformat
import papermill
import pytest

from cosmos_helpers.notebooks import find_cookbooks
from tests.cookbooks.runs import cookbook_names

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = find_cookbooks(ROOT)


def test_the_expected_cookbooks_exist():
    names = {path.name for path in NOTEBOOKS}
    assert "run_with_diffusers.ipynb" in names


def test_executed_copies_in_output_folders_are_not_cookbooks(tmp_path):
    """An interactive run leaves executed notebooks in ``outputs/`` beside the cookbooks (a sweep, one per run):
    ``run-cookbooks`` and the tests take the cookbooks only."""
    base = tmp_path / "cookbooks" / "cosmos3" / "generator"
    for relative in ("sweeps/seed.ipynb", "sweeps/outputs/sweep/seed=1/seed.ipynb", "a/.ipynb_checkpoints/x.ipynb"):
        (base / relative).parent.mkdir(parents=True, exist_ok=True)
        (base / relative).write_text("{}")
    assert find_cookbooks(tmp_path) == [base / "sweeps" / "seed.ipynb"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebooks_carry_no_outputs_and_one_tagged_parameters_cell(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, notebook
    tagged = [cell for cell in cells if "parameters" in cell.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, notebook
    assert {"profile", "output_dir"} <= set(papermill.inspect_notebook(str(notebook)))
    assert cells[0]["cell_type"] == "markdown"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_define_no_helper_functions_inline(notebook):
    for cell in json.loads(notebook.read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code":
            assert "\ndef " not in f"\n{source}" and "\nclass " not in f"\n{source}", (notebook, source[:80])


@pytest.mark.slow
@pytest.mark.parametrize("notebook", cookbook_names())
def test_cookbook_runs_to_the_end_without_an_error(cookbook_runs, notebook):
    """What nbmake checked, on the suite's one execution of each cookbook (its default parameters, but for its
    output folder; the Diffusers cookbook's run injects a seed): every code cell ran and none shows an error."""
    run = cookbook_runs.get(notebook)
    assert run.ok, run.error
    cells = [cell for cell in nbformat.read(run.executed, as_version=4).cells if cell.cell_type == "code"]
    assert cells and all(cell.execution_count is not None for cell in cells), run.executed
    errors = [output for cell in cells for output in cell.outputs if output.output_type == "error"]
    assert not errors, errors[0]


@pytest.mark.slow
def test_diffusers_cookbook_runs_under_papermill_with_injected_parameters(cookbook_runs):
    run = cookbook_runs.get("audiovisual/run_with_diffusers.ipynb")  # run-cookbooks (papermill) with -p seed 3
    assert run.ok, run.error
    out = run.output_dir
    manifests = {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}
    assert {"text2image", "text2video", "text2video_sound", "image2video", "image2video_sound",
            "video2video"} <= set(manifests)
    assert all(manifest["seed"] == 3 for manifest in manifests.values())
    assert (out / "text2image.png").is_file() and (out / "text2video_sound.mp4").is_file()
    assert manifests["text2video_sound"]["sound"]["sample_rate"] == 48000
    executed = json.loads(run.executed.read_text())
    injected = [cell for cell in executed["cells"] if "injected-parameters" in cell["metadata"].get("tags", [])]
    assert injected and "seed = 3" in "".join(injected[0]["source"])
