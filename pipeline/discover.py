"""Find the files of a corpus: recursive, deterministic, never outside the corpus.

Paths come back absolute and sorted, so every run sees the same order. Symlinked
directories are not followed (no loops); a symlinked file is read only when its target
lies inside one of the corpus roots (a link cannot pull in files from elsewhere).
"""


from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def discover(roots: Iterable[Path | str], exclude: Iterable[Path] = (),
             skipped: list[tuple[str, str]] | None = None) -> Iterator[str]:
    """Every regular file below ``roots`` (or the roots themselves, if files); a root
    that is a URI is listed through Beam's filesystems (:func:`discover_uri`).

    What is passed over on purpose (links out of the corpus, linked directories,
    sockets, unreadable directories) is appended to ``skipped`` as (path, reason), so
    ingest can record it instead of losing it silently."""
    def skip(path: str, reason: str) -> None:
        if skipped is not None:
            skipped.append((path, reason))

    roots = list(roots)
    found: list[str] = [p for r in roots if isinstance(r, str) and "://" in r
                        for p in discover_uri(r)]
    roots = [r for r in roots if not (isinstance(r, str) and "://" in r)]
    real_roots = [os.path.realpath(r) for r in roots]
    excluded = [os.path.abspath(e) for e in exclude]
    seen: set[str] = set()
    for root in roots:
        root_abs = os.path.abspath(root)
        if os.path.isfile(root_abs):
            found.append(root_abs)
            continue
        for dirs, files in _walk(root_abs, skip):
            dirs[:] = sorted((d for d in dirs if not _inside(d.path, excluded)),
                             key=lambda d: d.name)
            for d in dirs:
                if d.is_symlink():  # never followed: no loops, nothing from elsewhere
                    skip(d.path, "symlinked directory not followed")
            # only a directory an excluded path lies in (or under) needs the per-file
            # check: one test per directory instead of two per file (950k files)
            here = os.path.dirname(files[0].path) + os.sep if files else ""
            check = any(s.startswith(here) or here.startswith(s) for s in excluded)
            for entry in files:
                path = entry.path
                if check and (_inside(path, excluded)
                              or any(path.startswith(s) for s in excluded)):
                    continue
                if entry.is_symlink():
                    target = os.path.realpath(path)
                    if not os.path.exists(target):
                        skip(path, "broken symlink or symlink loop")
                        continue
                    if not _inside(target, real_roots) or not os.path.isfile(target):
                        skip(path, "symlink to outside the corpus not followed")
                        continue
                elif not _is_file(entry):
                    skip(path, "not a regular file (socket, fifo or device)")
                    continue
                found.append(path)
    for path in sorted(found):
        if path not in seen:
            seen.add(path)
            yield path


def discover_uri(root: str) -> list[str]:
    """Every object at or under ``root``, a URI of a Beam filesystem (``s3://b/logs``,
    ``gs://``, any registered scheme), listed through ``FileSystems.match``: the root
    itself when it names an object, else everything below ``root/`` (object stores
    have no directories; keys ending in ``/`` are folder markers, not files). The
    filesystem's options (endpoint, credentials) must be set before: see
    ``FileSystems.set_options``."""
    from apache_beam.io.filesystems import FileSystems  # a URI's: Beam only when needed

    from faultline.pipeline.objstore import remember_listing

    base = root.rstrip("/")
    listed = [m for m in FileSystems.match([base + "/**"])[0].metadata_list
              if not m.path.endswith("/")]
    if not listed:
        listed = FileSystems.match([base])[0].metadata_list
    remember_listing(listed)
    return sorted({m.path for m in listed})


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _walk(top: str, skip) -> Iterator[tuple[list[os.DirEntry], list[os.DirEntry]]]:
    """``os.walk(top, followlinks=False)`` (top-down, unreadable directories skipped),
    yielding the directory entries themselves: their types come from the directory
    listing, so a file costs no ``stat`` call of its own. The caller may prune ``dirs``."""
    stack = [top]
    while stack:
        path = stack.pop()
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError as exc:
            skip(path, f"unreadable directory: {exc.strerror or exc}")
            continue
        dirs: list[os.DirEntry] = []
        files: list[os.DirEntry] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry)
        yield dirs, files
        stack.extend(d.path for d in reversed(dirs) if not d.is_symlink())
