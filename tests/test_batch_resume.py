"""An interrupted papermill batch resumes: finished outputs are skipped by their manifests, the rest completes.

``run_cookbooks`` executes the Diffusers cookbook on the tiny model. The first run is interrupted in a
later cell: a folder squats on ``text2video_sound.json``, so that cell's manifest lookup fails before any
generation (as an I/O fault would). The rerun, with the obstacle gone, must not regenerate the outputs the
first run finished (same files, same mtimes, same manifest timestamps) and must produce all the others.
"""

from __future__ import annotations

import json
import os

import pytest

from cosmos_helpers.notebooks import run_cookbooks

FINISHED_FIRST = ("text2image.png", "text2video.mp4")
REST = ("text2video_sound", "image2video", "image2video_sound", "video2video", "text2video_shift3", "text2video_euler")


@pytest.mark.slow
def test_interrupted_batch_rerun_skips_finished_outputs(tmp_path):
    out = tmp_path / "run"
    folder = out / "audiovisual" / "run_with_diffusers"
    folder.mkdir(parents=True)
    blocker = folder / "text2video_sound.json"
    blocker.mkdir()  # the fault: the third output's manifest path is unusable

    first = run_cookbooks(out, only=["audiovisual/run_with_diffusers"], gallery=False)
    assert len(first) == 1 and not first[0].ok
    assert "text2video_sound.json" in first[0].error or "IsADirectoryError" in first[0].error, first[0].error
    finished = {}
    for name in FINISHED_FIRST:
        media_path = folder / name
        manifest = media_path.with_suffix(".json")
        assert media_path.is_file() and manifest.is_file(), sorted(os.listdir(folder))
        finished[name] = (media_path.stat().st_mtime_ns, manifest.stat().st_mtime_ns,
                          json.loads(manifest.read_text())["created"])
    for stem in REST[1:]:
        assert not (folder / f"{stem}.mp4").exists()  # the batch really stopped there

    blocker.rmdir()
    second = run_cookbooks(out, only=["audiovisual/run_with_diffusers"], gallery=False)
    assert second[0].ok, second[0].error
    for name, (media_mtime, manifest_mtime, created) in finished.items():
        media_path = folder / name
        manifest = media_path.with_suffix(".json")
        assert media_path.stat().st_mtime_ns == media_mtime, f"{name} was regenerated"
        assert manifest.stat().st_mtime_ns == manifest_mtime
        assert json.loads(manifest.read_text())["created"] == created
    for stem in REST:
        assert (folder / f"{stem}.mp4").is_file() and (folder / f"{stem}.json").is_file(), stem
        newer = (folder / f"{stem}.json").stat().st_mtime_ns
        assert newer > max(m for m, _, _ in finished.values())
    assert not [p.name for p in folder.iterdir() if ".partial" in p.name]


def test_a_run_with_other_parameters_into_the_same_folder_is_refused_before_any_notebook_runs(tmp_path):
    """The earlier run's executed copy (and, through its notebook, its outputs) would be replaced: refused first."""
    from cosmos_helpers.errors import OutputExistsError
    from cosmos_helpers.notebooks import NotebookRun, _write_summary

    out = tmp_path / "run"
    executed = out / "tiny_world" / "what_the_tiny_model_learned.ipynb"
    executed.parent.mkdir(parents=True)
    earlier = {"output_dir": str(out / "tiny_world" / "what_the_tiny_model_learned"), "profile": "tiny"}
    executed.write_text(json.dumps({"cells": [], "metadata": {"papermill": {"parameters": earlier}}}))
    with pytest.raises(OutputExistsError, match="overwrite=True"):
        run_cookbooks(out, profile="nano", only=["tiny_world/"], gallery=False)
    assert json.loads(executed.read_text())["metadata"]["papermill"]["parameters"] == earlier  # left alone
    from cosmos_helpers.notebooks import _check_earlier_run

    executed.write_text(json.dumps({"metadata": {"papermill": {"parameters": {**earlier, "overwrite": True}}}}))
    _check_earlier_run(executed, earlier, overwrite=False)  # overwrite itself is no difference: a rerun reuses
    # a run of some notebooks keeps the summary entries of the others
    _write_summary(out / "summary.json", [NotebookRun("a.ipynb", "a", "a", 1.0, True),
                                          NotebookRun("b.ipynb", "b", "b", 2.0, True)])
    _write_summary(out / "summary.json", [NotebookRun("a.ipynb", "a", "a", 3.0, False, "boom")])
    summary = json.loads((out / "summary.json").read_text())
    assert [(e["notebook"], e["seconds"], e["ok"]) for e in summary] == [("a.ipynb", 3.0, False),
                                                                          ("b.ipynb", 2.0, True)]
    (out / "summary.json").write_text(json.dumps([*summary, {"ok": True}, "note"]))  # edited by hand: no crash
    _write_summary(out / "summary.json", [NotebookRun("b.ipynb", "b", "b", 4.0, True)])
    assert [e["notebook"] for e in json.loads((out / "summary.json").read_text())] == ["a.ipynb", "b.ipynb"]
