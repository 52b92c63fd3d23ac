"""``benchmarks/gpu_parallel_rehearsal.py --smoke``: the one-GPU rehearsal of the multi-GPU plans, on CPU.

The script runs only on a GPU machine, where a broken one wastes the session's device time. Its smoke mode runs
the same steps (one-process references, two gloo ranks per plan, the report) with the tiny model in fp32, where
the sharded latents must equal the one-process ones exactly, as on the H200 with fixed kernels (run 21).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

ROOT = Path(__file__).resolve().parents[2]
EXACT = {"max_rel": 0.0, "rel_l2": 0.0}


@pytest.mark.slow
def test_the_rehearsal_script_runs_both_plans_and_reports_exact_latents(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                                                        os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "benchmarks/gpu_parallel_rehearsal.py", "--smoke", "--ulysses-calls", "2",
                           "--out", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "parallel_rehearsal.json").read_text())
    for name in ("cfg", "ulysses"):
        result = report[name]
        assert "error" not in result, result.get("error")
        assert result[f"{name} vs fast as {name} ranks"] == EXACT and result[f"{name} vs stock"] == EXACT, name
        assert result["rank1 vs rank0"] == EXACT and result["second call vs first"] == EXACT, name
        for rank in ("rank0", "rank1"):
            assert result[rank]["fast"]["stock_fallbacks"] == 0 and result[rank]["fast"]["calls"] > 0, (name, rank)
    cfg = report["cfg"]["rank0"]["cfg"]  # 2 calls x 3 steps: steps 2 and 3 of each ran their branches apart
    assert cfg == {"parallel_steps": 4, "serial_calls": 4, "kept_hits": 4, "kept_misses": 0}
