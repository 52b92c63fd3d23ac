"""Run-or-skip: the one call a notebook cell makes to produce a saved, reproducible output."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from .errors import OutputExistsError
from .request import GenerationRequest
from .result import Generation, check_free


class Backend(Protocol):
    name: str

    def generate(self, request: GenerationRequest) -> Generation: ...


def generate_and_save(backend: Backend, request: GenerationRequest, stem: str | Path, *,
                      overwrite: bool = False, skip_existing: bool = True, **kwargs: Any) -> Generation:
    """Generate ``request`` on ``backend`` and save it at ``stem`` (``.png``/``.mp4`` + ``.json``).

    When ``skip_existing`` and a finished output of the same request on the same backend is already at
    ``stem``, it is loaded instead of generated again, so an interrupted batch resumes where it stopped.
    """
    done = None if overwrite else check_free(stem, request, backend=backend.name)  # another run's output: refuse
    if done is not None:
        if not skip_existing:
            raise OutputExistsError(f"{done} is this request's finished output; pass overwrite=True to generate it "
                                    "again, or skip_existing=True to load it.")
        generation = Generation.load(done)
        generation.request = request
        generation.provenance["skipped"] = True
        return generation
    generation = backend.generate(request, **kwargs)
    generation.save(stem, overwrite=overwrite)
    return generation
