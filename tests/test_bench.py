"""``cosmos_helpers.bench`` on the tiny model (CPU): the table, the chart and the JSON, with the expected rows."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from cosmos_helpers.bench import Case, render_markdown, run_benchmark  # noqa: E402


def test_case_parsing():
    assert Case.parse("t2i:256", 189) == Case("text2image", "256", 1)
    assert Case.parse("t2v:480p:121", 189) == Case("text2video", "480", 121)
    assert Case.parse("i2v:256", 17) == Case("image2video", "256", 17)
    assert Case.parse("t2v+sound:128:9", 9) == Case("text2video", "128", 9, sound=True)
    with pytest.raises(ValueError):
        Case.parse("x2y:256", 9)


@pytest.mark.slow
def test_bench_tiny_writes_table_and_chart(tmp_path):
    result = run_benchmark(profile="tiny", cases="t2i:128,t2v:128:5,i2v:128:5,t2v+sound:128:5", steps=1,
                           repeats=1, out_dir=tmp_path, log=None)
    assert [r.error for r in result.rows] == [None] * 8
    assert {(r.case, r.backend) for r in result.rows} == {
        (case, backend) for case in ("t2i 128p", "t2v 128p 5f", "i2v 128p 5f", "t2v+sound 128p 5f")
        for backend in ("stock", "fast")}
    md = result.markdown_path.read_text()
    assert md == result.markdown
    assert "| Mode | Frames | Backend | 128p |" in md
    for title in ("| Text2Image | 1 | Diffusers (stock) |", "| Text2Image | 1 | Diffusers (fast path) |",
                  "| Text2Video | 5 | Diffusers (stock) |", "| Image2Video | 5 | Diffusers (fast path) |",
                  "| Text2Video + sound | 5 | Diffusers (fast path) |",
                  "| Text2Image | 1 | speed-up, Diffusers (fast path) vs stock |"):
        assert title in md, title
    assert "## Details" in md and "Cold s" in md and "Warm s" in md
    # the fast path's frames equal stock's on CPU (pixel difference column is 0)
    assert all(r.max_abs_diff_vs_stock == 0 for r in result.rows if r.backend == "fast")
    assert all(r.cold_s > 0 and r.warm_s > 0 and r.speedup for r in result.rows)
    png = result.png_path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    data = json.loads(result.json_path.read_text())
    assert len(data["rows"]) == 8 and data["settings"]["steps"] == 1


@pytest.mark.slow
def test_bench_builds_the_action_modes_media(tmp_path):
    """Action cases start from the package's rendered drive (and play its trajectory, for forward dynamics)."""
    assert Case.parse("fd:256:17", 9) == Case("forward_dynamics", "256", 17)
    result = run_benchmark(profile="tiny", cases="fd:256:5,id:256:5,wam:256:5", steps=1, repeats=1, out_dir=tmp_path,
                           log=None)
    assert [r.error for r in result.rows] == [None] * 6
    assert {r.case for r in result.rows} == {"fd 256p 5f", "id 256p 5f", "wam 256p 5f"}
    assert "| Forward dynamics | 5 | Diffusers (fast path) |" in result.markdown
    assert all(r.max_abs_diff_vs_stock == 0 for r in result.rows if r.backend == "fast")


def test_bench_cli(tmp_path, capsys):
    from cosmos_helpers.cli import main

    assert main(["bench", "--cases", "t2i:128", "--steps", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Text2Image" in out and (tmp_path / "benchmark.md").is_file() and (tmp_path / "benchmark.png").is_file()


def test_markdown_with_vllm_and_error_rows():
    from cosmos_helpers.bench import Row

    rows = [Row("t2i 256p", "text2image", "256", 1, "stock", 1.0, 2.0, speedup=1.0),
            Row("t2i 256p", "text2image", "256", 1, "vllm", 0.5, 1.0, speedup=2.0),
            Row("t2i 720p", "text2image", "720", 1, "vllm", error="ConnectError: refused")]
    md = render_markdown(rows, {"environment": {}, "guidance": 6.0, "text_tokens": None, "repeats": 1,
                                "random_nano": False, "profile": "nano", "steps": 35})
    assert "| Text2Image | 1 | vLLM-Omni | 1.00 | error |" in md
    assert "speed-up, vLLM-Omni vs stock | 2.00x |" in md


def test_scaling_chart_reads_the_gpu_count_from_each_backend(tmp_path):
    from cosmos_helpers.bench import Row, gpu_count, render_scaling_png

    assert [gpu_count(b) for b in ("fast", "fast-2gpu", "fast-4gpu-ulysses", "stock", "vllm")] == [1, 2, 4, None, None]
    rows = [Row(case="t2v 480p 189f", mode="text2video", tier="480", frames=189, backend=b, warm_s=s)
            for b, s in (("stock", 73.0), ("fast", 61.3), ("fast-2gpu", 33.0), ("fast-2gpu-ulysses", 35.0))]
    png = render_scaling_png(rows, tmp_path / "scaling.png", title="t").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_bench_with_a_step_cache_reports_the_passes(tmp_path):
    """``bench --step-cache sea``: every row ran cached and says how many passes computed and what each cost."""
    from cosmos_helpers.cli import main

    assert main(["bench", "--cases", "t2v:128:9", "--steps", "12", "--step-cache", "sea:1.0", "--out",
                 str(tmp_path)]) == 0
    data = json.loads((tmp_path / "benchmark.json").read_text())
    assert data["settings"]["step_cache"] == {"sea_cache": {"threshold": 1.0}}
    for row in data["rows"]:
        cache = row["extra"]["step_cache"]
        assert cache["passes"] == 24 and cache["passes_computed"] < 24
        assert cache["schedule"].count("C") == cache["passes_computed"]
    stock, fast = (row["extra"]["step_cache"]["schedule"] for row in data["rows"])
    assert stock == fast
    assert "## Step cache" in (tmp_path / "benchmark.md").read_text()


def test_gpu_step_cache_script_smoke(tmp_path, monkeypatch):
    """benchmarks/gpu_step_cache.py runs its rows on the tiny model on CPU (what the H200 run runs at Nano shapes)."""
    from tests.conftest import load_script

    script = load_script("benchmarks/gpu_step_cache.py")
    monkeypatch.setattr("sys.argv", ["gpu_step_cache.py", "--smoke", "--steps", "8", "--out", str(tmp_path)])
    assert script.main() == 0
    report = json.loads((tmp_path / "step_cache.json").read_text())
    rows = {row["row"]: row for row in report["rows"]}
    assert set(rows) == {"stock+sea", "fast+sea", "fast+dense"}
    assert rows["fast+sea"]["schedule"] == rows["stock+sea"]["schedule"]
    assert rows["fast+sea"]["psnr_vs_stock_db"] > 40 and rows["fast+sea"]["fast_fallbacks"] is None
    dense = rows["fast+dense"]["schedule"]  # first and last step full, then one computed step after two cached
    assert dense == "CC....CC....CCCC" and rows["fast+dense"]["passes_computed"] == 8
