"""Cookbooks are stored clean, are parameterised for papermill, and run end to end with injected values."""

import json
from pathlib import Path

import papermill
import pytest

from cosmos_helpers.notebooks import find_cookbooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = find_cookbooks(ROOT)


def test_the_expected_cookbooks_exist():
    names = {path.name for path in NOTEBOOKS}
    assert "run_with_diffusers.ipynb" in names


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
def test_diffusers_cookbook_runs_under_papermill_with_injected_parameters(tmp_path):
    import papermill

    notebook = next(p for p in NOTEBOOKS if p.name == "run_with_diffusers.ipynb")
    out = tmp_path / "out"
    papermill.execute_notebook(str(notebook), str(tmp_path / "executed.ipynb"), cwd=str(notebook.parent),
                               parameters={"output_dir": str(out), "seed": 7}, kernel_name="python3",
                               progress_bar=False)
    manifests = {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}
    assert {"text2image", "text2video", "text2video_sound", "image2video", "image2video_sound",
            "video2video"} <= set(manifests)
    assert all(manifest["seed"] == 7 for manifest in manifests.values())
    assert (out / "text2image.png").is_file() and (out / "text2video_sound.mp4").is_file()
    assert manifests["text2video_sound"]["sound"]["sample_rate"] == 48000
    executed = json.loads((tmp_path / "executed.ipynb").read_text())
    injected = [cell for cell in executed["cells"] if "injected-parameters" in cell["metadata"].get("tags", [])]
    assert injected and "seed = 7" in "".join(injected[0]["source"])
