"""Files given to a batch as their whole text: split in polars exactly as
``split_lines`` splits them, and read back line by line where a parser looks."""

from __future__ import annotations

import gzip

import pytest

from faultline.pipeline import fileparse
from faultline.pipeline.fileparse import parse_batch
from faultline.pipeline.linebatch import LineBatch, SeriesLines
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.text import first_lines, split_lines

TEXTS = [
    "",  # no lines
    "\n",  # one empty line
    "a",  # a last line without its newline
    "a\n",
    "a\n\n",  # an empty last line
    "a\nb",
    "a\r\nb\r\n",  # CRLF endings are one line end
    "a\r\nb",
    "\r\n",
    "a\rb\n",  # a lone CR stays inside its line
    "a\r\r\n",  # only the last CR of a CRLF goes
    "x\x00y\nz\n",  # NUL bytes are text
    "caf\u00e9 \ufffd\u2028still one line\n",  # U+2028 is no line end here
    "k\n" * 200,  # more lines than a block of SeriesLines
]


def test_texts_split_as_split_lines_does():
    items = [*TEXTS, ["l1", "l2"], [], ["q"], *TEXTS[::-1]]
    batch = LineBatch(items)
    want = [split_lines(t) if isinstance(t, str) else t for t in items]
    assert [list(f) for f in batch.files] == want
    assert batch.series.to_list() == [ln for f in want for ln in f]
    assert batch.starts.tolist()[-1] == batch.total == sum(map(len, want))
    # a batch of line lists only is the plain batch of before
    assert LineBatch(want).series.to_list() == batch.series.to_list()


def test_series_lines_is_a_sequence_of_str():
    text = "".join(f"line {i}\n" for i in range(300))
    batch = LineBatch(["head\n", text, "tail"])
    lines = batch.files[1]
    want = split_lines(text)
    assert isinstance(lines, SeriesLines) and len(lines) == 300
    assert [lines[i] for i in (0, 63, 64, 65, 128, 299, -1, -300)] == [
        want[i] for i in (0, 63, 64, 65, 128, 299, -1, -300)]
    assert lines[10:70] == want[10:70] and lines[::97] == want[::97] and lines[5:2] == []
    assert list(lines) == want and "line 7" in lines
    for bad in (300, -301):
        with pytest.raises(IndexError):
            lines[bad]
    assert batch.files[0][0] == "head" and batch.files[2][-1] == "tail"


def test_first_lines_of_a_text():
    for text in TEXTS:
        for n in (0, 1, 2, 5):
            assert first_lines(text, n) == split_lines(text)[:n]


def _kernel_logs(repo_root) -> list[tuple[str, bytes, None]]:
    """Large kernel logs (over the sniff's 64 KiB, so kept as text) built from the
    sample's: CRLF endings, a last line without its newline (and of no shape, with
    bytes that are not UTF-8), NUL bytes, gzip, and journal JSON."""
    hosts = repo_root / "fixtures" / "sample" / "corpus" / "hosts"
    body = b"".join(p.read_bytes() for p in sorted(hosts.glob("node000*/kern.log")))
    big = body * (1 + (1 << 17) // len(body))
    json_line = (b'{"MESSAGE":"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off '
                 b'the bus.","_HOSTNAME":"node0001","__REALTIME_TIMESTAMP":'
                 b'"1719835200000000","SYSLOG_IDENTIFIER":"kernel"}\n')
    return [
        ("/c/hosts/node0001/kern.log", big, None),
        ("/c/hosts/node0002/kern.log", big.replace(b"\n", b"\r\n"), None),
        ("/c/hosts/node0003/kern.log", big + b"\xff\xfe not a log line", None),
        ("/c/hosts/node0004/kern.log", big.replace(b"kernel:", b"kernel:\x00", 50), None),
        ("/c/hosts/node0005/kern.log.2.gz", gzip.compress(big, mtime=0), None),
        ("/c/hosts/node0006/journal.json", json_line * 600, None),
        ("/c/hosts/node0007/kern.log", body[:4000], None),  # small: split as before
    ]


def test_large_kernel_logs_parse_the_same_as_texts_or_lines(repo_root, monkeypatch):
    items = _kernel_logs(repo_root)
    assert min(len(gzip.decompress(d) if p.endswith(".gz") else d)
               for p, d, _ in items[:6]) > fileparse.SNIFF_BYTES
    settings = IngestSettings(year=2024, tz="UTC")
    kept = [fileparse._prepare(item, settings).lines for item in items]
    assert [isinstance(k, str) for k in kept] == [True] * 6 + [False]  # the small one: lines
    as_texts = parse_batch(items, settings)
    monkeypatch.setattr(fileparse, "TEXT_SOURCES", frozenset())
    as_lines = parse_batch(items, settings)
    for name in ("files", "events", "rejects"):
        assert getattr(as_texts, name).equals(getattr(as_lines, name)), name
    files = as_texts.files.to_pylist()
    assert {f["source"] for f in files} == {"kernel"}
    assert all(f["event_lines"] > 0 for f in files[:6])
    lines = [f["lines"] for f in files]
    assert lines[:5] == [lines[0], lines[0], lines[0] + 1, lines[0], lines[0]]
    assert lines[0] > 1000 and [f["reject_lines"] for f in files] == [0, 0, 1, 0, 0, 0, 0]
