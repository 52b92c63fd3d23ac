"""write_gallery: notebooks converted and linked, previews and thumbnails, a table of runs, relative links."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

from cosmos_helpers import Generation, GenerationRequest
from cosmos_helpers.gallery import write_gallery


def make_generation(*, seed: int, image: bool = False) -> Generation:
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (1 if image else 9, 96, 160, 3), dtype=np.uint8)
    sound = None
    if not image:
        t = np.arange(18_000) / 48_000
        sound = np.stack([0.3 * np.sin(2 * np.pi * 330 * t)] * 2).astype(np.float32)
    request = GenerationRequest(mode="text2image" if image else "text2video", prompt=f"a red kite over dunes {seed}",
                                width=160, height=96, num_frames=None if image else 9, sound=sound is not None,
                                seed=seed, num_inference_steps=3)
    return Generation(frames=frames, fps=24.0, seed=seed, request=request, sound=sound, backend="diffusers",
                      model="tiny", timings={"total_s": 2.5 + seed})


@pytest.fixture
def output_dir(tmp_path) -> Path:
    root = tmp_path / "run folder"  # a space, to prove links are quoted
    make_generation(seed=1).save(root / "t2v" / "clip")
    make_generation(seed=2, image=True).save(root / "t2i" / "still")
    (root / "notes.json").write_text('{"not": "a manifest"}')
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Tiny run"), nbformat.v4.new_code_cell("print('hello')")]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="hello\n")]
    nbformat.write(nb, str(root / "run_with_diffusers.ipynb"))
    return root


def test_gallery_page(output_dir):
    index = write_gallery(output_dir)
    assert index == output_dir / "index.html"
    page = index.read_text()
    # notebooks converted beside themselves and linked
    assert (output_dir / "run_with_diffusers.html").is_file()
    assert "href='run_with_diffusers.html'" in page
    assert "Tiny run" in (output_dir / "run_with_diffusers.html").read_text()
    # video: player on the preview, thumbnail poster; image: thumbnail linking the PNG
    assert "<source src='t2v/clip.preview.mp4' type='video/mp4'>" in page
    assert "poster='t2v/clip.thumb.jpg'" in page and "href='t2i/still.png'" in page
    assert (output_dir / "t2v" / "clip.preview.mp4").is_file() and (output_dir / "t2i" / "still.thumb.jpg").is_file()
    assert "data:video" not in page, "the gallery links previews, it does not embed them"
    # table of runs
    for text in ("text2video", "text2image", "160×96", "a red kite over dunes 1", "3.50", "4.50", "diffusers", "tiny"):
        assert text in page, text
    assert page.count("<tr>") == 3
    # relative links only
    links = re.findall(r"(?:href|src|poster)='([^']*)'", page)
    assert links and all(not link.startswith(("/", "file:", "http")) for link in links), links
    assert str(output_dir) not in page
    for link in links:
        assert (output_dir / link.replace("%20", " ")).exists(), link
    assert not [p for p in output_dir.rglob(".*")], "no temporary files left behind"


def test_gallery_rerun_reuses_previews_and_notebook_pages(output_dir):
    write_gallery(output_dir)
    preview = output_dir / "t2v" / "clip.preview.mp4"
    page = output_dir / "run_with_diffusers.html"
    stamps = (preview.stat().st_mtime_ns, page.stat().st_mtime_ns)
    write_gallery(output_dir)
    assert (preview.stat().st_mtime_ns, page.stat().st_mtime_ns) == stamps


def test_gallery_reports_missing_media_and_empty_folders(tmp_path, output_dir):
    (output_dir / "t2i" / "still.png").unlink()
    page = write_gallery(output_dir).read_text()
    assert "missing media file still.png" in page
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "No saved results" in write_gallery(empty).read_text()
    with pytest.raises(FileNotFoundError):
        write_gallery(tmp_path / "absent")
