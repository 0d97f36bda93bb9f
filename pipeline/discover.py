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


def discover(roots: Iterable[Path], exclude: Iterable[Path] = ()) -> Iterator[str]:
    """Every regular file below ``roots`` (or the roots themselves, if files)."""
    real_roots = [os.path.realpath(r) for r in roots]
    skip = [os.path.abspath(e) for e in exclude]
    seen: set[str] = set()
    found: list[str] = []
    for root in roots:
        root_abs = os.path.abspath(root)
        if os.path.isfile(root_abs):
            found.append(root_abs)
            continue
        for dirpath, dirnames, filenames in os.walk(root_abs, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames
                                 if not _inside(os.path.join(dirpath, d), skip))
            for name in filenames:
                path = os.path.join(dirpath, name)
                if _inside(path, skip) or any(path.startswith(s) for s in skip):
                    continue
                if os.path.islink(path):
                    target = os.path.realpath(path)
                    if not _inside(target, real_roots) or not os.path.isfile(target):
                        continue
                elif not os.path.isfile(path):
                    continue  # sockets, fifos, devices
                found.append(path)
    for path in sorted(found):
        if path not in seen:
            seen.add(path)
            yield path
