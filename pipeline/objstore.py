"""Reading files behind Beam filesystem URIs (``s3://``, ``gs://``, any registered
scheme) one file at a time, as ingest does for every file of a corpus.

Beam's ``FileSystems`` is what reads them, with the filesystem options the pipeline
was given (``--s3_endpoint_url``...). One exception, measured: Beam 2.77's S3
filesystem builds a new boto3 client for every call (``s3io.S3IO(options=...)`` in each
method), about 0.12 s each on the 2-core CI machine, so a 492-file corpus took 480 s
to ingest from a local S3 server, nearly all of it in client set-up. For ``s3://`` the
same Beam S3 reader (``S3IO``) is used with one client per process and set of S3
options; the client is a connection pool, not data, so nothing read is cached.

Requests per object, measured against a local S3 server (moto) on the 492-file sample:
Beam's reader asks for an object's metadata (a HEAD) before its bytes, and the re-run
check asked once more, so a first ingest sent two HEADs and a GET per file, and a re-run
a HEAD per file. Now a read is one GET (its response carries the size and the
last-modified time), and the re-run check takes both from the listing discovery made
(:func:`remember_listing`), as ``ls -l`` would.

Beam is imported by the functions that need it, not with this module: the driver of a
local run reads local files only and never imports Beam (:mod:`faultline.pipeline.beamrun`).
"""

from __future__ import annotations

import functools
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions

S3_FIELDS = ("s3_access_key_id", "s3_secret_access_key", "s3_session_token",
             "s3_endpoint_url", "s3_region_name", "s3_api_version", "s3_verify",
             "s3_disable_ssl")


def _options() -> PipelineOptions | None:
    """The options Beam's filesystems use in this process (the same lookup as
    ``FileSystems.get_filesystem``: set by the pipeline, or the runner's at run time)."""
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.value_provider import RuntimeValueProvider

    return FileSystems._pipeline_options or RuntimeValueProvider.runtime_options


def _s3io():
    """Beam's ``S3IO`` with this process's client for the current S3 options."""
    from apache_beam.options.pipeline_options import PipelineOptions, S3Options

    opts = _options()
    if isinstance(opts, PipelineOptions):
        s3 = opts.view_as(S3Options)
        key = tuple(getattr(s3, f, None) for f in S3_FIELDS)
    else:
        key = tuple((opts or {}).get(f) for f in S3_FIELDS)
    return _s3io_for(key)


@functools.lru_cache(maxsize=8)
def _s3io_for(key: tuple):
    from apache_beam.io.aws import s3io
    from apache_beam.options.pipeline_options import PipelineOptions

    return s3io.S3IO(options=PipelineOptions.from_dictionary(
        {f: v for f, v in zip(S3_FIELDS, key, strict=True) if v is not None}))


def read_uri(path: str, cap: int) -> tuple[bytes, float]:
    """An object's first ``cap`` bytes as stored and its last-modified time. An OSError
    when it cannot be read."""
    client = _boto3_client() if path.startswith("s3://") else None
    if client is None:
        mtime = stat_uri(path)[1]
        with open_uri(path) as f:
            return f.read(cap), mtime
    from apache_beam.io.aws.s3io import parse_s3_path

    bucket, key = parse_s3_path(path)
    try:
        got = client.get_object(Bucket=bucket, Key=key)
        body = got["Body"]
        try:
            data = body.read(cap)
        finally:
            body.close()  # a cut read leaves the rest unread: not back to the pool
    except Exception as exc:  # botocore's errors are not OSErrors
        raise OSError(f"{path}: {exc}") from exc
    return data, _seconds(got["LastModified"])


def _boto3_client():
    """boto3's client inside Beam's S3 client (one per process and set of options), or
    None should a Beam release name it otherwise (then Beam's own reader is used)."""
    return getattr(getattr(_s3io(), "client", None), "client", None)


def _seconds(last_modified) -> float:
    """A GET's last-modified time as Beam's S3 filesystem converts it (:func:`_whole`)."""
    from apache_beam.io.aws.s3io import S3IO

    return _whole(S3IO._updated_to_seconds(last_modified))


def _whole(seconds: float) -> float:
    """An object's time to the whole second: a HEAD's or a GET's header has whole
    seconds, a listing's may have milliseconds, and a re-run compares one with the
    other."""
    return float(int(seconds))


# s3:// objects listed by discovery in this process: path -> (size, last-modified).
# Each listing replaces what it lists; stat_uri takes an entry once.
_LISTED: dict[str, tuple[int, float]] = {}


def remember_listing(metadata: list) -> None:
    """Keep the size and time a listing gave for its s3:// objects (Beam's
    ``FileMetadata``), for the re-run check's :func:`stat_uri` in this process."""
    for m in metadata:
        if m.path.startswith("s3://"):
            _LISTED[m.path] = (m.size_in_bytes, _whole(m.last_updated_in_seconds))


def open_uri(path: str) -> IO[bytes]:
    """An object's bytes as stored (no decompression: the parser decides)."""
    if path.startswith("s3://"):
        return _s3io().open(path)
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path, compression_type="uncompressed")


def stat_uri(path: str) -> tuple[int, float]:
    """Size and last-modified time of an object: what a re-run compares, as it compares
    a local file's size and mtime. An OSError (Beam's ``BeamIOError`` is one) when it
    cannot be read."""
    if path.startswith("s3://"):
        listed = _LISTED.pop(path, None)
        if listed is not None:
            return listed
        try:
            status = _s3io()._status(path)
        except Exception as exc:
            raise OSError(f"{path}: {exc}") from exc
        return status["size"], _whole(status["last_updated"])
    from apache_beam.io.filesystems import FileSystems

    meta = FileSystems.get_filesystem(path).metadata(path)
    return meta.size_in_bytes, meta.last_updated_in_seconds
