"""``gunzip``'s one-call path for small files gives exactly what its piece loop gives:
every input below is decompressed both ways (the one-call path switched off for the
second, which is zlib's alone) and the (bytes, problem) pairs must be equal."""

from __future__ import annotations

import gzip
import zlib

import pytest
from isal import isal_zlib

from faultline.pipeline import inflate

BODY = b"".join(b"2024-07-01T12:00:%02d.000000Z node1:1:2 [0] NCCL INFO line %d\n"
                % (i % 60, i) for i in range(400))
ONE = gzip.compress(BODY, mtime=0)
TWO = ONE + gzip.compress(b"second member\n", mtime=0)
# a member of several input pieces (_GUNZIP_IN) and output pieces (_GUNZIP_OUT)
BIG_BODY = b"".join(b"%08x kernel: line %d %s\n" % (i * 2654435761 % 2**32, i, b"x" * (i % 97))
                    for i in range(220_000))
BIG = gzip.compress(BIG_BODY, compresslevel=1, mtime=0)


def _raw_deflate_member(body: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(body) + c.flush()


CASES = {
    "one member": ONE,
    "two members": TWO,
    "empty member": gzip.compress(b"", mtime=0),
    "empty member then one": gzip.compress(b"", mtime=0) + ONE,
    "nothing": b"",
    "header only": ONE[:10],
    "magic only": b"\x1f\x8b",
    "cut in the middle": ONE[:len(ONE) // 2],
    "cut before the trailer": ONE[:-4],
    "cut in the trailer": ONE[:-2],
    "trailing garbage": ONE + b"garbage",
    "trailing magic": ONE + b"\x1f\x8b",
    "trailing first magic byte": ONE + b"\x1f",
    "trailing zeros": ONE + b"\0" * 16,
    "corrupt body": ONE[:20] + bytes(range(256)) + ONE[276:],
    "corrupt start": b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4,
    "bad crc": ONE[:-8] + bytes(4) + ONE[-4:],
    "bad size": ONE[:-4] + bytes(4),
    "zlib level 9": _raw_deflate_member(BODY),
    "zeros 20 MB": gzip.compress(bytes(20 << 20), mtime=0),
    "big member": BIG,
    "big member cut": BIG[:len(BIG) - 1000],
    "big then small member": BIG + ONE,
    "big member then garbage": BIG + b"garbage",
}


INFLATERS = {"zlib": zlib, "isal": isal_zlib}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("limit", [inflate.MAX_PLAIN_BYTES, len(BIG_BODY),
                                   len(BIG_BODY) - 1, 1 << 20, len(BODY), len(BODY) - 1,
                                   10])
@pytest.mark.parametrize("inflater", INFLATERS)
def test_one_call_gives_what_the_loop_gives(name, limit, inflater, monkeypatch):
    """With ISA-L's inflate (the default) or zlib's in the one call; zlib's loop."""
    data = CASES[name]
    monkeypatch.setattr(inflate, "_ONE_CALL_ZLIB", INFLATERS[inflater])
    got = inflate.gunzip(data, limit)
    monkeypatch.setattr(inflate, "_GUNZIP_ONE_CALL", -1)
    assert got == inflate.gunzip(data, limit)


def test_isal_is_the_one_call_inflater():
    assert inflate._ONE_CALL_ZLIB is isal_zlib


def test_the_cases_reach_both_paths():
    """The small clean members take the one call; the rest the loop (else the test
    above compares the loop with itself)."""
    small = [d for d in CASES.values() if len(d) <= inflate._GUNZIP_ONE_CALL]
    assert len(small) >= 15
    assert inflate.gunzip(ONE) == (BODY, None)
    assert inflate.gunzip(CASES["zeros 20 MB"], 1 << 20)[1] == \
        "gzip content over 1048576 bytes not read"
    assert len(CASES["zeros 20 MB"]) <= inflate._GUNZIP_ONE_CALL
    assert len(BIG) > 2 * inflate._GUNZIP_IN and len(BIG_BODY) > inflate._GUNZIP_OUT
    assert inflate.gunzip(BIG) == (BIG_BODY, None)
