"""Run-or-skip: the one call a notebook cell makes to produce a saved, reproducible output."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from .backends.base import Backend
from .errors import OutputExistsError
from .request import GenerationRequest
from .result import Generation, check_free


def generate_and_save(backend: Backend, request: GenerationRequest, stem: str | Path, *,
                      overwrite: bool = False, skip_existing: bool = True, **kwargs: Any) -> Generation:
    """Generate ``request`` on ``backend`` and save it at ``stem``; with ``skip_existing``, this request's finished
    output from this backend (same ``output_settings``) at ``stem`` is loaded instead (a batch resumes)."""
    done = _finished(backend, request, stem, overwrite)
    if done is not None:
        if not skip_existing:
            raise OutputExistsError(f"{stem} holds this request's finished output; pass overwrite=True to generate "
                                    "it again, or skip_existing=True to load it.")
        return done
    generation = backend.generate(request, **kwargs)
    generation.save(stem, overwrite=overwrite)
    return generation


def generate_and_save_all(backend: Backend, jobs: Mapping[str | Path, GenerationRequest], *,
                          overwrite: bool = False) -> dict[Path, Generation]:
    """:func:`generate_and_save` for ``{stem: request}``: every stem checked first, finished outputs loaded, the rest
    through the backend's ``generate_many`` (the Cosmos Framework then loads its checkpoint once)."""
    stems = {Path(stem): request for stem, request in jobs.items()}
    results = {stem: done for stem, request in stems.items()
               if (done := _finished(backend, request, stem, overwrite)) is not None}
    todo = [stem for stem in stems if stem not in results]
    names = [s.name for s in todo]
    made = backend.generate_many([stems[s] for s in todo], names=names if len(set(names)) == len(names) else None) \
        if len(todo) > 1 else [backend.generate(stems[s]) for s in todo]
    for stem, generation in zip(todo, made):
        generation.save(stem, overwrite=overwrite)
        results[stem] = generation
    return {stem: results[stem] for stem in stems}


def _finished(backend: Backend, request: GenerationRequest, stem: str | Path, overwrite: bool) -> Generation | None:
    """This request's finished output at ``stem``, loaded and marked ``provenance["skipped"]`` (``None``: none, or
    ``overwrite``); another request's output there raises (``check_free``)."""
    done = None if overwrite else check_free(stem, request, backend=backend.name, settings=backend.output_settings())
    if done is None:
        return None
    generation = Generation.load(done)
    generation.request = request.resolve()
    generation.provenance["skipped"] = True
    return generation
