"""Writing files atomically: a temporary name beside the target, published with ``os.link`` (refuses to clobber) or
``os.replace`` (overwrite asked for), so a crash or a full disk never leaves a half-written final file."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
from pathlib import Path
from typing import Iterator

from ..errors import OutputExistsError


def _create_partial(final: Path) -> Path:
    """A new empty file beside ``final``, created with mode 0666 so the kernel applies the umask (0644 with the
    usual 022) as for any other tool's output; ``mkstemp``'s 0600 would hide it from a shared workshop folder."""
    while True:
        tmp = final.with_name(f".{final.name}.{secrets.token_hex(4)}.partial{final.suffix}")
        with contextlib.suppress(FileExistsError):
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp


@contextlib.contextmanager
def atomic_path(final: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; publish it as ``final`` only if the block succeeds. Without
    ``overwrite`` an existing ``final`` raises :class:`OutputExistsError`, before the work and again at publish time
    (so a concurrent writer is not clobbered either)."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fix = "pass overwrite=True or choose another name."
    if final.exists() and not overwrite:
        raise OutputExistsError(f"{final} already exists; {fix}")
    tmp = _create_partial(final)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, final)
        else:
            try:
                os.link(tmp, final)
            except FileExistsError:
                raise OutputExistsError(f"{final} appeared while writing; {fix}") from None
            except OSError:  # filesystems without hard links: a checked rename
                if final.exists():
                    raise OutputExistsError(f"{final} already exists; {fix}") from None
                os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_bytes_atomic(path: str | Path, data: bytes, *, overwrite: bool = False) -> Path:
    with atomic_path(path, overwrite=overwrite) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def copy_file_atomic(source: str | Path, target: str | Path, *, overwrite: bool = False) -> Path:
    """Publish a copy of ``source`` at ``target`` byte for byte (a finished file is never re-encoded)."""
    with atomic_path(target, overwrite=overwrite) as tmp:
        shutil.copyfile(source, tmp)
    return Path(target)


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()
