"""Archives read in place: members are files of their own, nothing is extracted, every
member's lines are counted, and a bundle of a corpus gives the corpus's answers."""

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
import zipfile
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline.bundles import SEP, archive_kind
from faultline.pipeline.fileparse import parse_batch, parse_file
from faultline.pipeline.settings import IngestSettings

# Real lines: leptonai/gpud components/accelerator/nvidia/xid/testdata/dmesg-with-xid-119.log
# (Apache-2.0, https://github.com/leptonai/gpud), a `dmesg -T` capture.
GPUD_XID = "peer-data/gpud/components/accelerator/nvidia/xid/testdata/dmesg-with-xid-119.log"
SETTINGS = IngestSettings()


def _tar(members: dict[str, bytes], mode: str = "w:gz", links: int = 0) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_719_835_200
            tar.addfile(info, io.BytesIO(data))
        for i in range(links):
            info = tarfile.TarInfo(f"link{i}")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return buf.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _files(parsed) -> dict[str, dict]:
    return {r["path"]: r for r in parsed.files.to_pylist()}


@pytest.fixture(scope="module")
def xid_log(shared_dir) -> bytes:
    return (shared_dir / GPUD_XID).read_bytes()


@pytest.mark.shared
@pytest.mark.parametrize("pack", [
    lambda m: _tar(m, "w:gz"), lambda m: _tar(m, "w"), lambda m: _tar(m, "w:bz2"),
    lambda m: _tar(m, "w:xz"), _zip,
], ids=["tar.gz", "tar", "tar.bz2", "tar.xz", "zip"])
def test_members_parse_as_the_files_they_are(pack, xid_log):
    suffix = {0x1F: ".tar.gz", 0x42: ".tar.bz2", 0xFD: ".tar.xz", 0x50: ".zip"}
    data = pack({"node0042/var/log/dmesg.txt": xid_log, "hosts/node0043/kern.log.2.gz":
                 gzip.compress(xid_log, mtime=0)})
    path = "/c/bundle" + suffix.get(data[0], ".tar")
    assert archive_kind(path, data) in ("tar", "zip")
    files = _files(parse_file(path, data, SETTINGS))
    alone = parse_file("/c/hosts/node0043/kern.log.2.gz", gzip.compress(xid_log, mtime=0),
                       SETTINGS)
    member = files[f"{path}{SEP}hosts/node0043/kern.log.2.gz"]
    assert member["source"] == "kernel" and member["host"] == "node0043"
    assert member["lines"] == xid_log.count(b"\n") == alone.files["lines"][0].as_py()
    assert member["event_lines"] == alone.files["event_lines"][0].as_py() > 0
    assert files[path]["source"] == "bundle" and files[path]["lines"] == 0
    assert files[path]["problem"] is None
    assert len(files) == 3


@pytest.mark.shared
def test_events_of_a_member_equal_the_extracted_file(xid_log):
    data = _zip({"hosts/node0043/dmesg.txt": xid_log})
    inside = parse_file("/c/b.zip", data, SETTINGS).events.to_pylist()
    alone = parse_file("/c/b.zip!/hosts/node0043/dmesg.txt", xid_log, SETTINGS)
    assert [(e["kind"], e["xid"], e["ts"], e["host"], e["line_no"]) for e in inside] == [
        (e["kind"], e["xid"], e["ts"], e["host"], e["line_no"])
        for e in alone.events.to_pylist()]
    assert any(e["xid"] == 119 for e in inside)


def test_archives_inside_archives_are_opened():
    inner = _tar({"hosts/n1/kern.log": b"Jul  1 12:00:00 n1 kernel: hello\n"})
    data = _zip({"inner.tar.gz": inner, "notes.txt": b"one\ntwo\n"})
    files = _files(parse_file("/c/outer.zip", data, SETTINGS))
    assert files["/c/outer.zip!/inner.tar.gz"]["source"] == "bundle"
    assert files["/c/outer.zip!/inner.tar.gz!/hosts/n1/kern.log"]["lines"] == 1
    assert files["/c/outer.zip!/notes.txt"]["reject_lines"] == 2  # counted, not lost


def test_a_gzipped_log_named_tar_gz_is_read_as_the_log():
    data = gzip.compress(b"Jul  1 12:00:00 n1 kernel: hello\n")
    assert archive_kind("/c/kern.tar.gz", data) is None
    files = _files(parse_file("/c/kern.tar.gz", data, SETTINGS))
    assert files["/c/kern.tar.gz"]["source"] == "kernel"


def test_damage_is_said_and_what_was_read_is_kept():
    whole = _tar({"a/kern.log": b"x\n" * 1000, "b/kern.log": b"y\n" * 1000}, "w")
    cut = whole[: 512 + 2048 + 512 + 1000]  # inside the second member's body
    files = _files(parse_file("/c/cut.tar", cut, SETTINGS))
    assert files["/c/cut.tar!/a/kern.log"]["lines"] == 1000
    assert files["/c/cut.tar"]["problem"] == (
        "corrupt archive after 1 member: unexpected end of data")
    assert "/c/cut.tar!/b/kern.log" not in files
    links = _files(parse_file("/c/l.tar", _tar({"k.log": b"z\n"}, "w", links=2), SETTINGS))
    assert links["/c/l.tar"]["problem"] == "2 links or special files inside not followed"
    assert set(links) == {"/c/l.tar", "/c/l.tar!/k.log"}  # the link is never read


def test_a_batch_with_an_archive_gives_each_file_what_it_gives_alone():
    line = (b"Jul  1 12:00:00 n2 kernel: NVRM: Xid (PCI:0000:3b:00): 79, "
            b"GPU has fallen off the bus.\n")
    items = [("/c/hosts/n2/kern.log", line, None),
             ("/c/b.zip", _zip({"hosts/n1/kern.log": line, "x/sel.txt": b"junk\n"}), None),
             ("/c/hosts/n3/kern.log", line * 2, None)]
    together = parse_batch(items, SETTINGS)
    alone = [parse_file(p, d, SETTINGS) for p, d, _ in items]
    by_path = {r["path"]: r for r in together.files.to_pylist()}
    for one in alone:
        for row in one.files.to_pylist():
            assert by_path.pop(row["path"]) == row
    assert not by_path
    assert together.events.num_rows == sum(a.events.num_rows for a in alone) == 4


@pytest.mark.slow
def test_a_bundle_of_the_sample_gives_the_same_interruptions(tmp_path, repo_root):
    """The sample corpus as one .tar.gz (how operators send a collection) gives the
    same interruptions, root causes and culprits as the directory, and a re-run of an
    unchanged bundle reads nothing; a changed bundle drops the members it lost."""
    corpus = tmp_path / "corpus"
    shutil.copytree(repo_root / "fixtures/sample/corpus", corpus)
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    bundle = bundle_dir / "cluster-logs.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(corpus, arcname="corpus")
    cols = ("job_id, failed_at, component, culprit_host, culprit_gpu, rule_id")

    def run(root: Path, db: Path) -> tuple[list, int, str]:
        out = CliRunner().invoke(app, ["ingest", str(root), "--db", str(db)])
        assert out.exit_code == 0, out.output
        with duckdb.connect(str(db), read_only=True) as con:
            rows = con.execute(f"SELECT {cols} FROM interruptions ORDER BY 1, 2").fetchall()
            lines = con.execute("SELECT sum(lines) FROM files").fetchone()[0]
        return rows, lines, out.output

    plain, plain_lines, _ = run(corpus, tmp_path / "plain.duckdb")
    packed, packed_lines, _ = run(bundle_dir, tmp_path / "packed.duckdb")
    assert packed == plain and len(plain) == 26
    assert packed_lines == plain_lines
    _, _, again = run(bundle_dir, tmp_path / "packed.duckdb")
    assert "(0 new or changed)" in again
    with tarfile.open(bundle, "w:gz") as tar:  # the bundle now lacks the job logs
        tar.add(corpus / "slurm", arcname="corpus/slurm")
    run(bundle_dir, tmp_path / "packed.duckdb")
    with duckdb.connect(str(tmp_path / "packed.duckdb"), read_only=True) as con:
        paths = [r[0] for r in con.execute("SELECT path FROM files").fetchall()]
        orphans = con.execute("SELECT count(*) FROM events WHERE path NOT IN "
                              "(SELECT path FROM files)").fetchone()[0]
    assert all("/corpus/slurm/" in p or p == str(bundle) for p in paths), paths[:5]
    assert orphans == 0
