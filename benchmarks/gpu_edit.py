"""Image editing at Nano shapes (random bf16 weights) on one H200: the edit loop against text-to-image at the same
output size, and a check that the input image conditions the output.

Rows: text2image and image2image at the framework's default edit size (our rendered 1280x720 still: 512x288) and at
the 720 bucket, 35 steps, guidance 6, 200-token prompts, stock diffusers (the edit loop has no fast path); each a
cold call then a timed warm call, peak = ``torch.cuda.max_memory_allocated`` of the warm call. An edit's passes
carry the input's tokens beside the output's (twice text2image's vision tokens at that size).
``input_effect`` = mean |edit(input) - edit(inverted input)| in pixel levels (same seed): 0 would mean the input is
ignored. Output: ``edit.json`` and ``edit.md``.

    python3 benchmarks/gpu_edit.py --out $OUT      # on the device, after the install line of GPU_RESULTS.md
    PYTHONPATH=$PWD python benchmarks/gpu_edit.py --dry-run --out /tmp/edit   # the flow on the CPU, tiny model
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
               "HF_HUB_OFFLINE": "1"}.items():
    os.environ[_k] = _v
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from cosmos_helpers import DiffusersBackend, GenerationRequest  # noqa: E402
from cosmos_helpers.bench import _diffusers_backends, _timed, prompt_of  # noqa: E402
from cosmos_helpers.samples import rolling_ball_clip  # noqa: E402


def timed(backend, request) -> dict:
    """A cold call, then the warm call measured (``bench._timed``: device synchronised, peak of the call)."""
    backend.generate(request)
    frames, seconds, peak, *_ = _timed("stock", backend, request, torch.cuda.is_available())
    return {"mode": request.mode, "size": f"{request.width}x{request.height}", "steps": request.num_inference_steps,
            "warm_s": round(seconds, 3), "peak_gib": None if peak is None else round(peak, 2), "frames": frames}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/edit"))
    ap.add_argument("--dry-run", action="store_true", help="tiny model on the CPU, 2 steps")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.dry_run:
        backend, profile, steps, prompt = DiffusersBackend(progress=False), "tiny", 2, "make the ball blue"
    else:
        from cosmos_helpers.models.random_nano import build_random_nano_pipeline

        pipe = build_random_nano_pipeline("cuda", torch.bfloat16)
        backend = _diffusers_backends(True, None, None, False, None, pipeline=pipe)["stock"]
        profile, steps, prompt = "nano", 35, prompt_of(200)
    still = rolling_ball_clip(1, 1280, 720)[0]
    common = dict(prompt=prompt, profile=profile, num_inference_steps=steps, guidance_scale=6.0, seed=0,
                  guardrails=False)
    native = GenerationRequest(mode="image2image", image=still, **common)
    bucket = GenerationRequest(mode="image2image", image=still, tier="720", **common)
    rows = []
    for request in (GenerationRequest(mode="text2image", width=native.width, height=native.height, **common), native,
                    GenerationRequest(mode="text2image", tier="720", aspect_ratio="16,9", **common), bucket):
        row = timed(backend, request)
        frames = row.pop("frames")
        if request.mode == "image2image":
            other = backend.generate(request.replace(image=255 - still)).frames
            row["input_effect"] = round(float(np.abs(frames.astype(int) - other.astype(int)).mean()), 2)
            row["varied"] = bool(frames.std() > 0)  # not one flat colour (NaNs decode to one)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "edit.json").write_text(json.dumps({"device": torch.cuda.get_device_name() if torch.cuda.is_available()
                                                   else "cpu", "torch": torch.__version__, "rows": rows}, indent=1))
    lines = ["| mode | size | steps | warm s | peak GiB | input effect |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['mode']} | {r['size']} | {r['steps']} | {r['warm_s']} | {r['peak_gib']} | "
              f"{r.get('input_effect', '')} |" for r in rows]
    (out / "edit.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
