"""Reading a local file: ``fileread.read_bytes`` through its descriptor gives what
``open(path).read(limit + 1)`` and ``os.stat(path).st_mtime`` give, for every size
around the bound and the chunk size, for a file that grows while it is read, and for
a file that is not a regular one."""

from __future__ import annotations

import os
import threading

import pytest

from faultline.pipeline import fileread

LIMIT = 200_000


def _plain(path: str, limit: int) -> tuple[bytes, float]:
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    return data, os.stat(path).st_mtime


@pytest.mark.parametrize("size", [0, 1, 99, 100, 101, 65_535, 65_536, 65_537,
                                  LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 70_000])
@pytest.mark.parametrize("newlines", [True, False])
def test_same_bytes_time_and_problem_as_a_plain_read(tmp_path, size, newlines):
    path = tmp_path / "kern.log"
    body = (b"0123456789abcde\n" * (size // 16 + 1))[:size]
    path.write_bytes(body if newlines else body.replace(b"\n", b"x"))
    os.utime(path, (1_700_000_000.25, 1_700_000_000.25))
    data, mtime, problem = fileread.read_bytes(str(path), LIMIT)
    plain, plain_mtime = _plain(str(path), LIMIT)
    assert mtime == plain_mtime == 1_700_000_000.25
    if len(plain) <= LIMIT:
        assert (data, problem) == (plain, None)
    else:  # cut at the last line end before the bound, as before
        cut = plain.rfind(b"\n", 0, LIMIT) + 1 or LIMIT
        assert data == plain[:cut]
        assert problem == f"file over {LIMIT} bytes: only its first {cut} bytes read"


def test_the_raw_read_stops_one_byte_past_the_cap(tmp_path):
    path = tmp_path / "big.log"
    path.write_bytes(b"y" * 300_000)
    for cap in (1, 65_536, 65_537, 299_999, 300_000, 300_001, 10**9):
        data, _ = fileread._read_local(str(path), cap)
        assert data == b"y" * min(cap, 300_000), cap


def test_a_pipe_is_read_to_its_end(tmp_path):
    """Not a regular file: its size says nothing and short reads are not its end."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    payload = b"line\n" * 50_000

    def write() -> None:
        with open(fifo, "wb") as f:
            for i in range(0, len(payload), 4096):
                f.write(payload[i:i + 4096])
                f.flush()

    t = threading.Thread(target=write)
    t.start()
    data, _ = fileread._read_local(str(fifo), 10**9)
    t.join()
    assert data == payload


def test_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        fileread.read_bytes(str(tmp_path / "gone.log"))
