"""benchmarks/gpu_fp8.py runs its rows on the tiny model on CPU (what the H200 run runs at Nano shapes), and
scripts/build_tiny_fp8.py writes a checkpoint with the policy it is given."""

from __future__ import annotations

import json

import pytest

from tests.conftest import load_script

pytestmark = pytest.mark.slow


def test_gpu_fp8_script_smoke(tmp_path, monkeypatch):
    script = load_script("benchmarks/gpu_fp8.py")
    out, work = tmp_path / "out", tmp_path / "work"
    monkeypatch.setattr("sys.argv", ["gpu_fp8.py", "--smoke", "--out", str(out), "--work", str(work)])
    assert script.main() == 0
    report = json.loads((out / "fp8.json").read_text())
    rows = {row["row"]: row for row in report["rows"]}
    assert set(rows) == {"bf16", "fp8", "fp8-w8a8"}
    assert rows["fp8"]["trace"] == "3 W8A16, 2 W8A8, 3 W8A16" and set(rows["fp8"]["by_kind_s"]) == {"W8A16", "W8A8"}
    assert rows["fp8-w8a8"]["trace"] == "8 base"  # diffusers' word for "no schedule": the native W8A8 forward
    assert rows["fp8"]["w8a8_gemm"].startswith("emulated")  # no FP8 GEMM on a CPU, and the manifest says so
    assert {"bf16", "fp8-w8a8", "fp8-w8a16"} <= set(report["kernels"]) and report["kernels"]["bf16"]["top"]
    monkeypatch.setattr("sys.argv", ["gpu_fp8.py", "--smoke", "--cap24", "--out", str(out), "--work", str(work)])
    assert script.main() == 0  # reuses the checkpoint the first run saved
    cap = json.loads((out / "fp8_cap24.json").read_text())["cap24"]
    assert set(cap) >= {"fp8-24GB", "bf16-24GB", "bf16-24GB-fp8-storage"}  # the baselines run on the same machine
    assert cap["fp8-24GB"]["trace"] == "4 W8A16" and cap["fp8-24GB"]["memory"]["offload"] == "group"
    storage = cap["bf16-24GB-fp8-storage"]  # FP8 storage is bf16 compute: no precision schedule
    assert storage["trace"] is None and storage["memory"]["weight_storage"] == "fp8"
    assert cap["bf16-24GB"]["memory"]["weight_storage"] is None


def test_build_script_writes_the_policy_it_is_given(tmp_path):
    script = load_script("scripts/build_tiny_fp8.py")
    assert script.main(["--out", str(tmp_path / "fp8"), "--first-steps", "2", "--reasoner", "native"]) == 0
    config = json.loads((tmp_path / "fp8" / "transformer" / "config.json").read_text())["quantization_config"]
    policy = config["runtime"]["diffusion_step_policy"]
    assert policy["first_steps"]["count"] == 2 and policy["last_steps"]["count"] == 3 and policy["reasoner"] == "native"
    with pytest.raises(SystemExit):
        script.main(["--out", str(tmp_path / "fp8")])  # nothing is overwritten
