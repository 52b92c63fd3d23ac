"""The held-out evaluation runs through a real backend and reports what it measured, against the targets (the
trained model's rates themselves are checked in ``tests/models/test_trained_tiny.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cosmos_helpers.errors import OutputExistsError
from cosmos_helpers.world import render_uint8, sample_scenes
from cosmos_helpers.world.evaluate import TARGETS, MeaningReport, evaluate


@pytest.mark.slow
def test_every_check_runs_and_reports(tiny_backend):
    report = evaluate(tiny_backend, n=2, seed=0)
    summary = report.summary()
    assert set(report.rows) == {"text2video", "image2video", "video2video", "transfer"}
    assert all(len(rows) == 2 for rows in report.rows.values())
    assert all(row["frames"].shape == (9, 96, 160, 3) for rows in report.rows.values() for row in rows)
    assert 0 <= summary["t2v_colour"] <= 1 and not math.isnan(summary["v2v_join_over_step"])
    assert 0 <= summary["transfer_f1_shuffled"] <= 1 and summary["i2v_first_frame_psnr_min"] > 0
    assert set(summary) >= set(TARGETS)


def _report() -> MeaningReport:
    clips = render_uint8(sample_scenes(3, seed=1, split="heldout"))
    return MeaningReport(rows={
        "text2video": [dict(prompt="a", frames=clips[0], colour_ok=True, direction_ok=False),
                       dict(prompt="b", frames=clips[1], colour_ok=True, direction_ok=True)],
        "video2video": [dict(prompt="c", frames=clips[2], join_over_step=1.5)],
    })


def test_targets_are_judged_in_their_direction():
    report = _report()
    assert report.met("t2v_colour") and not report.met("t2v_direction")  # 1.0 >= 0.9; 0.5 < 0.8
    assert not report.met("v2v_join_over_step")  # 1.5 is above the "at most 1" target
    table = report._repr_markdown_()
    assert "| text-to-video: the named colour dominates | >= 0.9 | 1.00 | met |" in table
    assert "| <= 1 | 1.50 | not yet |" in table and "transfer" not in table  # only what was measured


def test_the_sheet_labels_each_sample_with_its_verdict(tmp_path):
    from PIL import Image

    path = _report().sheet(tmp_path / "sheet.png")
    image = np.asarray(Image.open(path))
    assert image.shape[0] > 3 * 96 and image.shape[2] == 3
    with pytest.raises(OutputExistsError):  # an existing sheet is never silently replaced
        _report().sheet(tmp_path / "sheet.png")
    assert _report().sheet(tmp_path / "sheet.png", overwrite=True) == path
