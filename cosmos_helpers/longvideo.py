"""``long_video``: a clip longer than one generation, made chunk after chunk, resumable, saved with its chunks.

Chunk ``i > 0`` continues chunk ``i - 1`` *as saved* (its file), so a rerun builds the same requests and skips the
chunks saved for them. Everything is checked before the first chunk, including which saved files are this run's
(reused) or another run's (refused unless ``overwrite=True``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .chaining import check_conditioning_frames, join, join_continuity, latent_indexes
from .errors import OutputExistsError, ValidationError
from .presets import DEFAULT_SEED, normalize_mode
from .progress import progress_bar
from .request import GenerationRequest, ResolvedRequest
from .resolve import MAX_SEED
from .result import MANIFEST_SUFFIX, Generation, existing_output, find_saved, read_manifest, record_fingerprint
from .workflow import Backend

WORKFLOW = "long_video"
JOIN_RULE = ("each continuation's first conditioning_frames frames (its re-creation of the previous chunk's last "
             "frames) are dropped; no crossfade")
SOUND_RULE = ("each chunk's track cut to its frames; over the overlap span the previous track fades linearly into "
              "the next")
_FIRST_MODES = ("text2video", "image2video")


@dataclass(frozen=True)
class LongVideoRecord:
    """What the joined video's manifest records: the plan it was made from and each chunk it is made of."""

    plan: str
    backend: str
    conditioning_frames: int
    chunks: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"workflow": WORKFLOW, "plan": self.plan, "backend": self.backend,
                "conditioning_frames": self.conditioning_frames, "join": JOIN_RULE, "sound_join": SOUND_RULE,
                "chunks": [dict(chunk) for chunk in self.chunks]}

    def fingerprint(self) -> str:
        return record_fingerprint(self.to_dict())


@dataclass
class _Plan:
    """The checked inputs of a long video: what each chunk asks for, and where it is saved."""

    prompts: list[Any]
    seeds: list[int]
    first: ResolvedRequest
    options: dict[str, Any]
    conditioning_frames: int
    folder: Path
    stem: Path
    backend: str
    settings: dict[str, Any]

    @property
    def count(self) -> int:
        return len(self.prompts)

    def chunk_stem(self, index: int) -> Path:
        return self.folder / f"chunk_{index:02d}"

    def request(self, index: int, previous: Path | np.ndarray | None = None) -> ResolvedRequest:
        """Chunk ``index``'s request; a continuation is conditioned on ``previous`` (the saved chunk before)."""
        if index == 0:
            return self.first
        return GenerationRequest(mode="video2video", prompt=self.prompts[index], seed=self.seeds[index],
                                 video=previous, condition_frames=latent_indexes(self.conditioning_frames),
                                 condition_video_keep="last", **self.options).resolve()

    def fingerprint(self, probes: Sequence[ResolvedRequest]) -> str:
        records = [self.first.to_dict()] + [{k: v for k, v in p.to_dict().items() if k != "video"} for p in probes]
        return record_fingerprint({"workflow": WORKFLOW, "backend": self.backend, "chunks": records})


def long_video(prompts: Any, backend: Backend, *, chunks: int | None = None, out: str | Path = "outputs",
               name: str = "long_video", seed: int = DEFAULT_SEED, seeds: Sequence[int] | None = None,
               conditioning_frames: int | None = None, overwrite: bool = False, progress: bool = True,
               **options: Any) -> Generation:
    """Generate ``chunks`` chained clips and join them into one video, saved at ``<out>/<name>.mp4``.

    Args:
        prompts: one prompt for every chunk, or a list with one prompt per chunk (``chunks`` defaults to its length).
        seed / seeds: chunk ``i`` uses ``seed + i``, unless ``seeds`` gives one per chunk.
        conditioning_frames: how many of the previous chunk's last frames each continuation is conditioned on
            (``1 + 4k``; default Cosmos3's video2video default, 5).
        overwrite: replace files another run left at these names (chunks of this very run are reused anyway).
        options: the rest of the request (``profile``, ``num_frames``, ``image`` for an image2video first chunk, ...).

    Each chunk is saved as ``<out>/<name>_chunks/chunk_NN.mp4`` as it finishes; the joined video's manifest lists them.
    """
    plan = _plan(prompts, backend, chunks=chunks, out=out, name=name, seed=seed, seeds=seeds,
                 conditioning_frames=conditioning_frames, options=options)
    probes = [plan.request(i, np.zeros((1, plan.first.height, plan.first.width, 3), np.uint8))
              for i in range(1, plan.count)]
    for request in [plan.first] + probes[:1]:  # what the backend would refuse only once a chunk is under way
        backend.check(request)
    fingerprint = plan.fingerprint(probes)
    reusable = _reusable_chunks(plan, overwrite)
    if (done := _finished(plan, fingerprint, reusable, overwrite)) is not None:
        return done
    started = time.perf_counter()
    saved = _make_chunks(plan, backend, reusable, overwrite, progress)
    return _save_joined(plan, fingerprint, saved, overwrite, time.perf_counter() - started)


def _plan(prompts: Any, backend: Any, *, chunks: int | None, out: str | Path, name: str, seed: int,
          seeds: Sequence[int] | None, conditioning_frames: int | None, options: dict[str, Any]) -> _Plan:
    prompt_list = _prompt_list(prompts, chunks)
    seed_list = _seeds(seed, seeds, len(prompt_list))
    options = dict(options)
    mode = options.pop("mode", None)
    image = options.pop("image", None)
    if options.pop("video", None) is not None:
        raise ValidationError("video", "a long video starts from text or an image; continuing a video is extend().",
                              "drop video=, or call extend(generation, prompt, backend).")
    if mode is not None and normalize_mode(mode) not in _FIRST_MODES:
        raise ValidationError("mode", f"a long video starts with a text2video or image2video chunk, not {mode}.",
                              "use mode='text2video' (or 'image2video' with image=); to continue a video, extend().")
    first_mode = mode or ("image2video" if image is not None else "text2video")
    first = GenerationRequest(mode=first_mode, prompt=prompt_list[0], seed=seed_list[0], image=image,
                              **options).resolve()
    frames = check_conditioning_frames(conditioning_frames, first.num_frames)
    if not isinstance(name, str) or not name.strip() or Path(name).name != name:
        raise ValidationError("name", f"{name!r} is not a file name.", "pass a plain name such as 'long_video'.")
    folder = Path(out)
    return _Plan(prompt_list, seed_list, first, options, frames, folder / f"{name}_chunks", folder / name,
                 backend.name, backend.output_settings())


def _prompt_list(prompts: Any, chunks: int | None) -> list[Any]:
    if chunks is not None and (isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1):
        raise ValidationError("chunks", f"{chunks!r} is not a number of chunks (1 or more).", "pass e.g. chunks=3.")
    if isinstance(prompts, (list, tuple)):
        if not prompts:
            raise ValidationError("prompts", "the prompt list is empty.", "give one prompt per chunk, or one prompt.")
        if chunks is not None and chunks != len(prompts):
            raise ValidationError("chunks", f"{chunks} chunks but {len(prompts)} prompts.",
                                  "give one prompt per chunk, or one prompt for all, or leave chunks out.")
        return list(prompts)
    if chunks is None:
        raise ValidationError("chunks", "one prompt and no chunk count.", "pass chunks=3 (or a list of prompts).")
    return [prompts] * int(chunks)


def _seeds(seed: int, seeds: Sequence[int] | None, count: int) -> list[int]:
    if seeds is None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED - count:
            raise ValidationError("seed", f"{seed!r} is not an integer from 0 to 2**63-1-chunks.", "pass e.g. seed=0.")
        return [int(seed) + i for i in range(count)]
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or len(seeds) != count:
        raise ValidationError("seeds", f"expected {count} seeds (one per chunk), got {seeds!r}.",
                              "pass one seed per chunk, or leave seeds out (chunk i then uses seed + i).")
    return list(seeds)  # each is validated by its chunk's request


def _reusable_chunks(plan: _Plan, overwrite: bool) -> list[Path]:
    """The saved chain from chunk 0 a rerun can reuse; another run's file at a later chunk's name is refused."""
    reusable: list[Path] = []
    for index in range(plan.count):
        done = find_saved(plan.chunk_stem(index), plan.request(index, reusable[-1].resolve() if reusable else None),
                          backend=plan.backend, settings=plan.settings)
        if done is None:
            break
        reusable.append(done)
    if not overwrite:
        for index in range(len(reusable), plan.count):
            if (stale := existing_output(plan.chunk_stem(index))) is not None:
                raise OutputExistsError(f"{stale} is chunk {index} of another long video (another request, or a "
                                        "chunk before it changed); pass overwrite=True, or another name or out folder.")
    return reusable


def _finished(plan: _Plan, fingerprint: str, reusable: list[Path], overwrite: bool) -> Generation | None:
    """The joined video of this very plan, when a previous run finished it; refuses another run's."""
    manifest = read_manifest(plan.stem.with_suffix(MANIFEST_SUFFIX))
    existing = existing_output(plan.stem)
    if overwrite or (manifest is None and existing is None):
        return None
    record = (manifest or {}).get("request") or {}
    if record.get("workflow") != WORKFLOW or record.get("plan") != fingerprint:
        raise OutputExistsError(f"{existing or plan.stem.with_suffix(MANIFEST_SUFFIX)} is another run's output; "
                                "pass overwrite=True, or another name or out folder.")
    if len(reusable) < plan.count:
        raise OutputExistsError(f"{existing} is this long video, but its saved chunks are missing or changed, so it "
                                "cannot be checked; keep it (Generation.load) or pass overwrite=True to remake it.")
    if existing is None or existing.suffix == MANIFEST_SUFFIX:  # this plan's manifest survived, its video did not:
        plan.stem.with_suffix(MANIFEST_SUFFIX).unlink()  # join the saved chunks again
        return None
    generation = Generation.load(existing)
    generation.request = LongVideoRecord(fingerprint, plan.backend, plan.conditioning_frames,
                                         tuple(record.get("chunks", ())))
    generation.provenance["skipped"] = True
    return generation


def _make_chunks(plan: _Plan, backend: Backend, reusable: list[Path], overwrite: bool, progress: bool) -> list[Path]:
    saved = list(reusable)
    with progress_bar(plan.count, "long video", "chunk", enabled=progress) as bar:
        if saved:
            bar.update(len(saved))
            bar.set_postfix_str(f"{len(saved)} saved chunk(s) reused")
        for index in range(len(saved), plan.count):
            generation = backend.generate(plan.request(index, saved[-1].resolve() if saved else None))
            saved.append(generation.save(plan.chunk_stem(index), overwrite=overwrite))
            bar.update(1)
            bar.set_postfix_str(f"chunk {index + 1}/{plan.count}: {generation.num_frames} frames")
    return saved


def _save_joined(plan: _Plan, fingerprint: str, saved: list[Path], overwrite: bool, seconds: float) -> Generation:
    chunks = [Generation.load(path) for path in saved]
    overlaps = [0] + [plan.conditioning_frames] * (plan.count - 1)
    frames, sound, starts = join(chunks, overlaps)
    listed = []
    for index, (path, chunk) in enumerate(zip(saved, chunks)):
        manifest = chunk.provenance.get("manifest") or {}
        listed.append({"index": index, "media": path.relative_to(plan.stem.parent).as_posix(),
                       "fingerprint": manifest.get("fingerprint"), "seed": chunk.seed,
                       "prompt": (manifest.get("request") or {}).get("prompt"), "frames": chunk.num_frames,
                       "kept_from": overlaps[index], "starts_at": starts[index]})
    record = LongVideoRecord(fingerprint, plan.backend, plan.conditioning_frames, tuple(listed))
    joined = Generation(frames=frames, fps=chunks[0].fps, seed=plan.seeds[0], request=record, sound=sound,
                        sample_rate=chunks[0].sample_rate, backend=plan.backend, model=chunks[0].model,
                        timings={"total_s": seconds}, provenance={"continuity": join_continuity(frames, starts)})
    joined.save(plan.stem, overwrite=overwrite)
    return joined


def chunk_starts(generation: Generation) -> list[int]:
    """Where each chunk's frames begin in a joined long video (from its record, or its saved manifest)."""
    record = generation.request.to_dict() if isinstance(generation.request, LongVideoRecord) else \
        ((generation.provenance.get("manifest") or {}).get("request") or {})
    if record.get("workflow") != WORKFLOW:
        raise ValidationError("generation", "it is not a long video (its record lists no chunks).",
                              "pass what long_video() returned, or Generation.load() of its saved .mp4.")
    return [int(chunk["starts_at"]) for chunk in record["chunks"]]

