"""A trivial notebook to sweep: it records what it was given (parameters, GPU, folder), saves one tiny image
with a generation manifest, and fails (or kills the worker process running it) while a marker file exists."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

PARAMETERS = '''seed = 0
guidance = 1.5
label = "x"
output_dir = "outputs/echo"
server_url = None
fail_while = None   # a path: the notebook fails while this file exists
kill_worker_while = None  # a path: the kernel kills the sweep worker process running it while this file exists
'''

BODY = '''import json, os
from pathlib import Path

import numpy as np

from cosmos_helpers import Generation

out = Path(output_dir)
out.mkdir(parents=True, exist_ok=True)
(out / "record.json").write_text(json.dumps({
    "seed": seed, "guidance": guidance, "label": label, "server_url": server_url,
    "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "cwd": os.getcwd()}))
if kill_worker_while and Path(kill_worker_while).exists():
    import signal
    os.kill(os.getppid(), signal.SIGKILL)
if fail_while and Path(fail_while).exists():
    raise RuntimeError(f"asked to fail while {fail_while} exists")
Generation(np.full((1, 16, 24, 3), (seed * 60 + int(guidance * 10)) % 256, dtype=np.uint8), fps=1.0,
           seed=seed).save(out / "image")
'''


def write_echo_notebook(folder: Path, parameters: str = PARAMETERS) -> Path:
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(parameters)
    cell.metadata["tags"] = ["parameters"]
    notebook.cells = [nbformat.v4.new_markdown_cell("# echo"), cell, nbformat.v4.new_code_cell(BODY)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "echo.ipynb"
    nbformat.write(notebook, str(path))
    return path


@pytest.fixture
def echo(tmp_path) -> Path:
    return write_echo_notebook(tmp_path / "nb")
