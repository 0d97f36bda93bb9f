"""A corpus in an object store: ``faultline ingest s3://bucket/corpus`` lists and reads
it through Beam's FileSystems (the S3 filesystem, options through ``--beam-opt``),
against a real S3-compatible server on loopback (moto's server mode, started and
stopped here). The corpus (the sample, its gzip logs, plus a ``.tar.gz`` support
bundle) is uploaded from a temporary directory that is deleted before the S3 ingest,
so the run reads files it never saw on disk. Its tables are those of the on-disk run
but for the paths and the mtimes (an object's last-modified time); a re-run reads
nothing, and an object rewritten in the bucket is read again."""

from __future__ import annotations

import io
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from dask_cluster import free_port
from snapshot import snapshot
from typer.testing import CliRunner

from faultline.cli import app

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
BUCKET, PREFIX = "cluster-logs", "corpus"
KEYS = {"s3_access_key_id": "testing", "s3_secret_access_key": "testing",
        "s3_region_name": "us-east-1"}
FILES_MTIME = "mtime"  # the one files column that differs between disk and bucket
#: Re-run bookkeeping, not results: the inputs' digest names the corpus root, and only
#: local job directories can be sealed (an object store has no directory mtimes).
BOOKKEEPING = ("ingest_state", "sealed_dirs")


@pytest.fixture(scope="module")
def moto_log(tmp_path_factory) -> Path:
    """The server's request log: one line per request (``"GET /bucket/key ..."``)."""
    return tmp_path_factory.mktemp("moto") / "moto.log"


def requests_since(log: Path, start: int) -> Counter:
    """HTTP methods of the requests logged after byte ``start`` of the log."""
    text = log.read_bytes()[start:].decode("utf-8", "replace")
    return Counter(m.group(1) for m in re.finditer(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+) /', text))


@pytest.fixture(scope="module")
def s3_endpoint(moto_log: Path):
    """moto's S3 server on a free loopback port, stopped after the module."""
    port = free_port()
    log = moto_log.open("wb")
    proc = subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "moto_server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def bundle(sample: Path) -> bytes:
    """A support bundle as an operator hands it over: a host's /var/log in a tar.gz."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("kern.log", "sel.txt"):
            data = (sample / "hosts" / "node0001" / name).read_bytes()
            info = tarfile.TarInfo(f"node0001/var/log/{name}.bundled")
            info.size, info.mtime = len(data), 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def s3_opts(endpoint: str) -> list[str]:
    opts = [f"s3_endpoint_url={endpoint}", *(f"{k}={v}" for k, v in KEYS.items())]
    return [a for o in opts for a in ("--beam-opt", o)]


def ingest_s3(uri: str, db: Path, endpoint: str) -> tuple[int, str]:
    proc = subprocess.run([str(BIN / "faultline"), "ingest", uri, "--db", str(db),
                           *s3_opts(endpoint)], capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def without_mtime(db: Path, tables: dict[str, list[str]], prefix: str) -> dict:
    """The snapshot with the corpus prefix cut from every path and files.mtime left out."""
    with duckdb.connect(str(db), read_only=True) as con:
        cols = [c for c, in con.execute("SELECT column_name FROM information_schema.columns "
                                        "WHERE table_name = 'files' ORDER BY ordinal_position"
                                        ).fetchall() if c != FILES_MTIME]
        files = sorted(map(str, con.execute(
            f"SELECT {', '.join(cols)} FROM files").fetchall()))
    out = {**{t: r for t, r in tables.items() if t not in BOOKKEEPING}, "files": files}
    return {t: sorted(r.replace(prefix, "<corpus>") for r in rows) for t, rows in out.items()}


def test_a_corpus_in_s3_gives_the_tables_of_the_same_files_on_disk(
        repo_root: Path, s3_endpoint: str, moto_log: Path, tmp_path: Path):
    import boto3

    sample = repo_root / "fixtures" / "sample" / "corpus"
    staged = tmp_path / "upload"  # the corpus exists on disk only until it is uploaded
    shutil.copytree(sample, staged)
    (staged / "bundles").mkdir()
    (staged / "bundles" / "node0001-logs.tar.gz").write_bytes(bundle(sample))

    local_db = tmp_path / "disk.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(staged), "--db", str(local_db)])
    assert result.exit_code == 0, result.output
    on_disk = without_mtime(local_db, snapshot(local_db), str(staged))

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    for f in sorted(staged.rglob("*")):
        if f.is_file():
            s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{f.relative_to(staged)}",
                          Body=f.read_bytes())
    shutil.rmtree(staged)

    uri = f"s3://{BUCKET}/{PREFIX}"
    db = tmp_path / "s3.duckdb"
    n_objects = sum(1 for f in sample.rglob("*") if f.is_file()) + 1
    start = moto_log.stat().st_size
    rc, out = ingest_s3(uri, db, s3_endpoint)
    assert rc == 0, out
    # one GET per object to parse it, at most one more for discovery's pre-pass, and no
    # HEAD: the size and time come with the GET and the listing (pipeline/objstore.py)
    sent = requests_since(moto_log, start)
    assert sent["HEAD"] == 0 and n_objects <= sent["GET"] <= 2 * n_objects + 20, sent
    from_s3 = without_mtime(db, snapshot(db), uri)
    assert from_s3 == on_disk
    with duckdb.connect(str(db), read_only=True) as con:
        (members,), = con.execute("SELECT count(*) FROM files WHERE path LIKE "
                                  "'%.tar.gz!/%'").fetchall()
        (gz,), = con.execute("SELECT count(*) FROM files WHERE path LIKE '%.log.gz' "
                             "AND lines > 0").fetchall()
        (no_mtime,), = con.execute("SELECT count(*) FROM files WHERE mtime IS NULL "
                                   "AND path NOT LIKE '%!/%'").fetchall()
    assert members == 2 and gz > 0 and no_mtime == 0

    start = moto_log.stat().st_size
    rc, out = ingest_s3(uri, db, s3_endpoint)  # nothing changed: nothing read
    assert rc == 0 and "(0 new or changed)" in out, out
    sent = requests_since(moto_log, start)  # the listing's pages only
    assert sent["HEAD"] == 0 and sent["GET"] <= 10, sent
    assert without_mtime(db, snapshot(db), uri) == on_disk

    key = f"{PREFIX}/hosts/node0002/kern.log"
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=key, Body=body + body.splitlines(keepends=True)[0])
    rc, out = ingest_s3(uri, db, s3_endpoint)
    assert rc == 0 and "(1 new or changed)" in out, out


def test_a_uri_with_nothing_under_it_is_exit_2(s3_endpoint: str, tmp_path: Path):
    rc, out = ingest_s3(f"s3://{BUCKET}-none/logs", tmp_path / "x.duckdb", s3_endpoint)
    assert rc == 2, out
    assert "Traceback" not in out and f"s3://{BUCKET}-none/logs" in out
