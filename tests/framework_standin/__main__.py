"""STAND-IN for ``python -m cosmos_framework.scripts.inference`` -- NOT the NVIDIA Cosmos Framework.

A test double of the inference CLI's *command-line contract*, so :class:`cosmos_helpers.backends.framework.
FrameworkBackend` can be driven end to end on a CPU machine without a framework checkout. It is honest about what
it is: it always runs the embedded **tiny** weights, whatever ``--checkpoint-path`` names (its banner says
so), with that checkpoint's defaults (a distilled 4-step checkpoint: the tiny weights in the distilled format, on
the fixed schedule with guidance 1, as the framework runs one), and it never shrinks what an input asks for
(tests give it small inputs).

* flags: a subset of the real ones (checked against ``tests/contracts/fixtures``): ``-i/--input-files`` (files),
  ``-o/--output-dir``, ``--checkpoint-path``, the sample overrides ``--seed``, ``--resolution``, ``--num-steps``,
  ``--parallelism-preset``, ``--[no-]guardrails`` (on by default, as there: the tiny run then needs
  ``cosmos_guardrail``), ``--[no-]diffusion-cache``; any other flag is an error, as in the real CLI;
* inputs: read as the framework reads them (a ``.json`` file holds one sample, a ``.jsonl`` one per line; a sample
  without ``name`` is named after its file) and validated against the real ``OmniSampleOverrides`` JSON schema
  from the contract fixture, so an unknown field fails here as it fails there;
* outputs, the framework's layout: ``<out>/<name>/vision.mp4`` (``vision.jpg`` for one frame),
  ``control_<hint>.mp4`` for transfer, an action sample's predicted actions in ``sample_outputs.json``;
  ``step k/N`` progress lines; on a bad input an ``ERROR: ...`` line and exit code 1.

Run it as ``python -m tests.framework_standin -i input.json -o out/`` from the repository root.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import traceback
from pathlib import Path

BANNER = ("[framework stand-in] a cosmos_helpers test double, NOT the NVIDIA Cosmos Framework: it runs the embedded "
          "tiny weights whatever --checkpoint-path says")
FIXTURE = Path(__file__).resolve().parents[1] / "contracts" / "fixtures" / "cosmos_framework-5eee9ed.json"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="framework_standin", description=BANNER, allow_abbrev=False)
    parser.add_argument("-i", "--input-files", nargs="+", required=True, type=Path)
    parser.add_argument("-o", "--output-dir", required=True, type=Path)
    parser.add_argument("--checkpoint-path", default="Cosmos3-Nano")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--resolution", default=None)
    parser.add_argument("--num-steps", type=int, default=None)
    parser.add_argument("--parallelism-preset", choices=("throughput", "latency"), default=None)
    for flag in ("guardrails", "diffusion-cache"):
        parser.add_argument(f"--{flag}", dest=flag.replace("-", "_"), action="store_true", default=None)
        parser.add_argument(f"--no-{flag}", dest=flag.replace("-", "_"), action="store_false")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Unknown flags are an error (exit code 2), as in the real CLI."""
    return build_parser().parse_args(argv)


def read_inputs(paths: list[Path]) -> list[tuple[dict, Path, str]]:
    """``(sample, input file, name)`` as the framework's ``from_files`` reads them."""
    import jsonschema

    schema = json.loads(FIXTURE.read_text(encoding="utf-8"))["sample_overrides_schema"]
    samples = []
    for path in sorted(set(paths)):
        if path.suffix == ".jsonl":
            items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        else:
            items = [json.loads(path.read_text(encoding="utf-8"))]
        for line, item in enumerate(items):
            jsonschema.validate(item, schema)
            name = item.get("name") or (f"{path.stem}_{line}" if path.suffix == ".jsonl" else path.stem)
            samples.append((item, path, name))
    return samples


def run_one(item: dict, path: Path, name: str, args: argparse.Namespace) -> Path:
    from cosmos_helpers import DiffusersBackend, media
    from cosmos_helpers.protocol import framework as fw
    from cosmos_helpers.protocol import variants
    from cosmos_helpers.specs import Sample
    from cosmos_helpers.specs.runs import SampleRun, check_backend, given_fields, localize
    from cosmos_helpers.transfer.runner import execute

    sample = Sample.from_dict(item, base_dir=path.parent, name=name, source=path)
    overrides = {"seed": args.seed, "resolution": args.resolution, "num_steps": args.num_steps}
    folder = args.output_dir / name
    hub = {v: k for k, v in fw.CHECKPOINTS.items()}.get(args.checkpoint_path, args.checkpoint_path)
    # guardrails: the flag given, else the framework's default (on): the tiny diffusers run honours them too
    resolved = sample.resolved(model=hub, overrides=overrides, output_dir=folder, guardrails=args.guardrails)
    check_backend(sample, resolved, "diffusers", given_fields(sample, overrides))
    if hub in variants.DISTILLED_CHECKPOINTS:  # the tiny weights in the distilled format; the framework samples a
        # distilled checkpoint on its fixed schedule with guidance 1, whatever the sample says (inference.py:1575-1580)
        resolved = dataclasses.replace(localize(resolved, progress=False), model="tiny-distilled",
                                       profile="tiny-distilled", num_steps=len(variants.DISTILLED_T_LIST),
                                       guidance=variants.DISTILLED_GUIDANCE, shift=variants.DISTILLED_SHIFT)
    else:
        resolved = dataclasses.replace(localize(resolved, progress=False), model="tiny", profile="tiny")
    run = SampleRun.create(sample, resolved, overrides)

    def step(done: int, total: int) -> None:
        print(f"step {done}/{total}", flush=True)

    generation = execute(run, _Progress(DiffusersBackend(progress=False), step), progress=step)  # saved as there
    target = folder / fw.vision_file(generation.num_frames)
    if generation.finished is not None:
        generation.finished.publish(target, overwrite=True)
    else:
        media.write_mp4(target, generation.frames, generation.fps, sound=generation.sound,
                        sample_rate=generation.sample_rate, crf=generation.crf, overwrite=True)
    if generation.actions is not None:  # inference.py:1796-1806: the predicted actions, cut to the raw width
        record = {"args": item, "outputs": [{"content": {"action": generation.actions.tolist()},
                                             "files": [str(target)]}]}
        (folder / fw.SAMPLE_OUTPUTS).write_text(json.dumps(record), encoding="utf-8")
    for kind, frames in (getattr(generation, "controls", None) or {}).items():
        media.write_mp4(folder / fw.CONTROL_FILE.format(hint=kind, suffix=".mp4"), frames, generation.fps,
                        overwrite=True)
    return target


class _Progress:
    """A DiffusersBackend whose generation requests report their steps as log lines (like the framework's)."""

    def __init__(self, backend, step) -> None:
        self._backend, self._step, self.name = backend, step, backend.name

    def generate(self, request):
        return self._backend.generate(request, progress=self._step)

    def __getattr__(self, name):
        return getattr(self._backend, name)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(BANNER, flush=True)
    os.environ.setdefault("COSMOS_HELPERS_NO_PROGRESS", "1")
    try:
        if os.environ.get("OMP_NUM_THREADS"):
            import torch

            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        for item, path, name in read_inputs(args.input_files):
            print(f"saved {run_one(item, path, name, args)}", flush=True)
    except Exception as exc:  # the framework logs the error and exits non-zero
        traceback.print_exc(file=sys.stdout)
        message = getattr(exc, "message", None) or str(exc)
        print(f"ERROR: {type(exc).__name__}: {message.splitlines()[0] if message else ''}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
