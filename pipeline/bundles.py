"""Archives an operator hands over (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``,
``.tar.xz``, ``.zip``), read in place: never extracted to disk.

A support bundle or a ``/var/log`` tree collected with ``tar czf`` is as common an input
as a directory. Each member becomes a file of its own, named
``<archive path>!/<member path>`` (the jar-URL convention), so its host and job come from
the member's path exactly as they would from an extracted tree, and its rows are keyed
on its own bytes. The archive itself gets one ``files`` row (source ``bundle``, no
lines) that carries its size, mtime and hash, which is what lets a re-run skip an
unchanged archive without opening it.

Bounded like every other read: a member's content is cut at the same limit as a plain
file's (:data:`MEMBER_LIMIT`), at most :data:`MAX_MEMBERS` members are read (the rest are
named in the archive's ``problem``), archives inside archives are opened to
:data:`MAX_DEPTH` levels, and what cannot be read (a corrupt archive, an encrypted zip
member) is said in ``problem``, keeping every member read before it. Links and devices
inside a tar are not files and are passed over (counted in ``problem``).
"""

from __future__ import annotations

import bz2
import datetime as dt
import io
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Iterator

SEP = "!/"  # between an archive's path and a member's path
MEMBER_LIMIT = 1 << 30  # the per-file bound of pipeline.inflate.MAX_PLAIN_BYTES
MAX_MEMBERS = 100_000
MAX_DEPTH = 3

_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
SUFFIXES = (*_TAR_SUFFIXES, ".zip")  # names a pre-pass opens (the parse goes by content)

# (path, bytes as stored, mtime, problem)
Member = tuple[str, bytes, float | None, str | None]


def archive_kind(path: str, data: bytes) -> str | None:
    """``"zip"`` or ``"tar"`` when ``data`` is an archive, else None.

    Decided from the bytes: a zip's local-header (or empty-archive) magic, a tar's
    ``ustar`` magic at offset 257. A compressed tar is recognized by its name
    (``.tar.gz``, ``.tgz``...) and then confirmed by tarfile: gunzipping every ``.gz``
    log just to look for a tar header would cost a second decompression of each."""
    head = data[:4]
    if head in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if data[257:262] == b"ustar":
        return "tar"
    if path.lower().endswith(_TAR_SUFFIXES) and _compressed_tar(data):
        return "tar"
    return None


def _compressed_tar(data: bytes) -> bool:
    """The first tar header, decompressed, carries the ``ustar`` magic (a ``.tar.gz``
    that is really one gzipped log is read as that log)."""
    if data[:2] == b"\x1f\x8b":
        d: object = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif data[:3] == b"BZh":
        d = bz2.BZ2Decompressor()
    elif data[:6] == b"\xfd7zXZ\x00":
        d = lzma.LZMADecompressor()
    else:
        return False
    try:
        head = d.decompress(data[:1 << 16], 512)  # type: ignore[attr-defined]
    except (zlib.error, OSError, lzma.LZMAError, EOFError):
        return False
    return head[257:262] == b"ustar"


def expand(path: str, data: bytes, problems: list[str], depth: int = 1
           ) -> Iterator[Member]:
    """The archive's members as files, read one at a time (archives inside it opened
    in turn, their members before them); what went wrong reading it is appended to
    ``problems``. Directory entries, links and devices are not members."""
    reader = _zip_members if archive_kind(path, data) == "zip" else _tar_members
    count = 0
    try:
        for name, content, mtime, problem in reader(data, problems):
            if count >= MAX_MEMBERS:
                problems.append(f"only the first {MAX_MEMBERS} members read")
                break
            count += 1
            inner = f"{path}{SEP}{name.lstrip('/')}"
            if depth < MAX_DEPTH and problem is None and archive_kind(inner, content):
                inner_problems: list[str] = []
                yield from expand(inner, content, inner_problems, depth + 1)
                problem = "; ".join(inner_problems) or None
            yield inner, content, mtime, problem
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, zlib.error,
            lzma.LZMAError, ValueError) as exc:
        problems.append(f"corrupt archive after {count} member{'s' * (count != 1)}: {exc}")


def _tar_members(data: bytes, problems: list[str]) -> Iterator[Member]:
    passed = 0
    # Stream mode ("r|*") reads front to back once, whatever the compression.
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|*") as tar:
        for info in tar:
            if not info.isfile():
                passed += not info.isdir()
                continue
            f = tar.extractfile(info)
            if f is None:
                continue
            body, problem = _bounded(f.read(MEMBER_LIMIT + 1))
            if problem is None and len(body) < info.size:  # the archive ends inside it
                problem = f"member cut short: {len(body)} of {info.size} bytes in the archive"
                problems.append("archive cut short")
            yield info.name, body, float(info.mtime), problem
    if passed:
        problems.append(f"{passed} links or special files inside not followed")


def _zip_members(data: bytes, problems: list[str]) -> Iterator[Member]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            mtime = dt.datetime(*info.date_time, tzinfo=dt.UTC).timestamp()
            if info.flag_bits & 0x1:
                yield info.filename, b"", mtime, "encrypted zip member not read"
                continue
            with z.open(info) as f:
                content = f.read(MEMBER_LIMIT + 1)
            body, problem = _bounded(content)
            yield info.filename, body, mtime, problem


def _bounded(content: bytes) -> tuple[bytes, str | None]:
    if len(content) <= MEMBER_LIMIT:
        return content, None
    cut = content.rfind(b"\n", 0, MEMBER_LIMIT) + 1 or MEMBER_LIMIT
    return content[:cut], f"member over {MEMBER_LIMIT} bytes: only its first {cut} bytes read"


def with_members(path: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    """``(path, data)`` itself, or, for an archive, each of its members: what a
    corpus-wide pre-pass (the job records' time window, say) needs to see the files
    inside bundles too."""
    if archive_kind(path, data) is None:
        yield path, data
        return
    for inner, content, _mtime, _problem in expand(path, data, []):
        yield inner, content

