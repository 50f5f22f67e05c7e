"""Where the jobs' files live: a local directory or an object store that ``etils.epath`` reaches.

Every file a job reads or writes goes through :func:`path_of` (an ``epath.Path``): a local path
behaves as before, and ``gs://``, ``s3://`` or ``az://`` reach a bucket through fsspec (``gcsfs``
for ``gs://``). Orbax writes its checkpoints there itself.

Atomic writes. Locally, :func:`write_atomic` writes a temporary file in the same folder, fsyncs it,
renames it into place and fsyncs the folder. An object store has no rename (a "rename" is a copy
and a delete, and slow on some stores) but replaces an object as a whole: an upload becomes visible
only once complete, so readers see the old object or the new one. Remotely, ``write_atomic`` is that
one upload. A directory (the tokenizer) is published by :func:`staged_dir`: a rename locally;
remotely every file is uploaded, then a marker object last, which :func:`published` checks.

Libraries that want local files (the tokenizer's ``save_pretrained``/``from_pretrained``,
matplotlib, tensorboardX, ``logging.FileHandler``, appends) get them from :func:`local_copy`,
:func:`staged_file` and :class:`Mirror`, which copy to and from the remote location. For a local
destination they hand out the destination itself (or a temporary file beside it), so local runs
keep their exact behaviour.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from etils import epath

from cocoda_jax.errors import ConfigError

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: The schemes ``epath`` sends to fsspec for reading and writing (``hf://`` is read-only).
REMOTE_SCHEMES = ("gs", "s3", "az")
#: The object :func:`staged_dir` writes last into a remote directory it publishes.
PUBLISHED_MARKER = ".published"


def scheme(where: str | os.PathLike) -> str | None:
    """The URL scheme of ``where`` (``"gs"``), or ``None`` for a local path."""
    m = _URL.match(os.fspath(where))
    return m.group(1).lower() if m else None


def is_remote(where: str | os.PathLike) -> bool:
    return scheme(where) is not None


def path_of(where: str | os.PathLike) -> epath.Path:
    """``where`` as an ``epath.Path``: a local path, or a URL of :data:`REMOTE_SCHEMES` whose fsspec
    filesystem is installed. Anything else is a :class:`ConfigError`, raised before anything is
    written (``pathlib.Path`` would quietly turn ``gs://bucket/run`` into a local ``gs:/bucket/run``)."""
    if isinstance(where, epath.Path):
        return where
    text = os.fspath(where)
    found = scheme(text)
    if found is None:
        return epath.Path(text)
    if found not in REMOTE_SCHEMES:
        raise ConfigError(f"{text!r}: the scheme {found}:// is not reachable; a work directory is a local path "
                          f"or a URL of {', '.join(s + '://' for s in REMOTE_SCHEMES)}")
    try:
        import fsspec

        fsspec.get_filesystem_class(found)
    except (ImportError, ValueError) as e:
        raise ConfigError(f"{text!r}: {found}:// needs its fsspec filesystem ({e})") from None
    return epath.Path(text)


def local_path(path: epath.Path | str | os.PathLike) -> pathlib.Path:
    """A local ``epath.Path`` as a ``pathlib.Path`` (for ``os`` calls); remote paths are refused."""
    if is_remote(path):
        raise ValueError(f"{os.fspath(path)} is not a local path")
    return pathlib.Path(os.fspath(path))


def write_atomic(path: str | os.PathLike, data: bytes | str, mode: int = 0o644) -> epath.Path:
    """Writes ``data`` to ``path`` (parents created) so that a reader sees the old file or the whole
    new one: locally a synced temporary file renamed into place, remotely one upload (see the module
    docstring). Returns the path."""
    path = path_of(path)
    data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if is_remote(path):
        path.write_bytes(data)
        return path
    target = local_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it owner-only
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return path


def list_files(root: str | os.PathLike) -> dict[str, epath.Path]:
    """Every file under ``root`` as ``relative posix path -> path`` (empty when ``root`` is absent).
    Walks folder by folder: ``epath`` refuses a recursive glob on a bucket."""
    root = path_of(root)
    out: dict[str, epath.Path] = {}

    def walk(folder: epath.Path, prefix: str) -> None:
        for child in sorted(folder.iterdir(), key=lambda p: p.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            else:
                out[prefix + child.name] = child

    if root.is_dir():
        walk(root, "")
    return out


def _download(src: epath.Path, dest: pathlib.Path, only: tuple[str, ...] | None = None) -> None:
    """``src``'s files into ``dest``; ``only``: just these entries of ``src`` (files or folders)."""
    roots = [src] if only is None else [src / name for name in only]
    files = {}
    for root in roots:
        if only is not None and root.is_file():
            files[root.name] = root
        else:
            prefix = "" if only is None else root.name + "/"
            files.update({prefix + rel: path for rel, path in list_files(root).items()})
    for rel, path in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())


@contextlib.contextmanager
def local_copy(src: str | os.PathLike) -> Iterator[pathlib.Path]:
    """A local directory holding ``src``'s files, for readers that need one (``src`` itself when
    local; remotely a temporary download, deleted on exit)."""
    src = path_of(src)
    if not is_remote(src):
        yield local_path(src)
        return
    with tempfile.TemporaryDirectory(prefix="cocoda-read-") as tmp:
        _download(src, pathlib.Path(tmp))
        yield pathlib.Path(tmp)


def published(dest: str | os.PathLike) -> bool:
    """Whether :func:`staged_dir` finished publishing ``dest``."""
    dest = path_of(dest)
    return (dest / PUBLISHED_MARKER).exists() if is_remote(dest) else dest.is_dir()


@contextlib.contextmanager
def staged_dir(dest: str | os.PathLike) -> Iterator[pathlib.Path]:
    """A fresh local directory to fill; on a clean exit it becomes ``dest`` (a rename locally;
    remotely an upload of every file, then :data:`PUBLISHED_MARKER`). On an error ``dest`` is left
    as it was (remotely: perhaps some files, never the marker)."""
    dest = path_of(dest)
    if not is_remote(dest):
        target = local_path(dest)
        tmp = target.with_name(target.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)  # what a killed attempt left
        target.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, target)
        return
    with tempfile.TemporaryDirectory(prefix="cocoda-stage-") as tmp:
        yield pathlib.Path(tmp) / dest.name
        for file in sorted(p for p in (pathlib.Path(tmp) / dest.name).rglob("*") if p.is_file()):
            write_atomic(dest / file.relative_to(pathlib.Path(tmp) / dest.name).as_posix(), file.read_bytes())
        write_atomic(dest / PUBLISHED_MARKER, b"")


@contextlib.contextmanager
def staged_file(dest: str | os.PathLike) -> Iterator[pathlib.Path]:
    """A local file name for writers that take one (matplotlib's ``savefig``); on a clean exit its
    bytes replace ``dest`` through :func:`write_atomic`. Locally the file is beside ``dest``."""
    dest = path_of(dest)
    folder = None if is_remote(dest) else local_path(dest).parent
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".cocoda-stage-", dir=folder) as tmp:
        file = pathlib.Path(tmp) / dest.name
        yield file
        write_atomic(dest, file.read_bytes())


def replace_tree(root: str | os.PathLike, files: dict[str, str]) -> None:
    """Makes ``root`` hold exactly ``files`` (``relative path -> text``). Locally: written beside
    it, then renamed into place. Remotely: each file one upload, then the others deleted (not one
    atomic step; callers restore it from a checkpoint, which a kill leaves intact)."""
    root = path_of(root)
    if is_remote(root):
        for rel, text in files.items():
            write_atomic(root / rel, text)
        for rel, path in list_files(root).items():
            if rel not in files:
                path.unlink(missing_ok=True)
        return
    target = local_path(root)
    tmp = target.with_name(target.name + ".restore")
    if tmp.exists():
        shutil.rmtree(tmp)
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if target.exists():
        shutil.rmtree(target)
    if files:
        os.replace(tmp, target)


class Mirror:
    """A local directory standing for ``dest``, for writers that append or keep a file open
    (metrics.jsonl, TensorBoard's event files, the log file). For a local ``dest`` it is ``dest``
    and :meth:`sync` does nothing. For a remote one it starts as a download of ``dest``'s files;
    :meth:`sync` uploads each file whose bytes changed since the last sync, one whole object each
    (so a reader never sees part of an append), and :meth:`close` syncs and deletes the copy.
    ``only``: the entries of ``dest`` (files or folders) the mirror holds; the rest of ``dest`` (a
    run's checkpoints) is neither downloaded nor compared."""

    def __init__(self, dest: str | os.PathLike, only: Sequence[str] | None = None):
        self.dest = path_of(dest)
        self.remote = is_remote(self.dest)
        self.only = None if only is None else tuple(only)
        self._tmp: Any = None
        self._synced: dict[str, str] = {}
        if not self.remote:
            self.local = local_path(self.dest)
            self.local.mkdir(parents=True, exist_ok=True)
            return
        self._tmp = tempfile.TemporaryDirectory(prefix="cocoda-mirror-")
        self.local = pathlib.Path(self._tmp.name)
        _download(self.dest, self.local, self.only)
        self._synced = {rel: digest for rel, digest in self._digests().items()}

    def _digests(self) -> dict[str, str]:
        roots = [self.local] if self.only is None else [self.local / name for name in self.only]
        files = [p for root in roots for p in ([root] if root.is_file() else sorted(root.rglob("*"))) if p.is_file()]
        return {p.relative_to(self.local).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}

    def sync(self) -> None:
        if not self.remote or self._tmp is None:
            return
        for rel, digest in self._digests().items():
            if self._synced.get(rel) != digest:
                write_atomic(self.dest / rel, (self.local / rel).read_bytes())
                self._synced[rel] = digest

    def close(self) -> None:
        if self._tmp is None:
            return
        self.sync()
        self._tmp.cleanup()
        self._tmp = None


__all__ = ["Mirror", "PUBLISHED_MARKER", "REMOTE_SCHEMES", "is_remote", "list_files", "local_copy", "local_path",
           "path_of", "published", "replace_tree", "scheme", "staged_dir", "staged_file", "write_atomic"]
