"""``--workers`` by default: one below the measured size, every core above it.

The tables do not depend on the choice (tests/test_hostile_corpus.py::
test_two_workers_give_the_tables_of_one); these tests pin the choice itself.
"""

from __future__ import annotations

import gzip

import pytest

from faultline.pipeline import beamrun, run, workers


def _file(path, size: int, gz: bool = False):
    data = b"x" * size
    if gz:  # the compressed size is what counts (times GZ_FACTOR), so store it raw
        with gzip.open(path, "wb", compresslevel=0) as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    return str(path)


def test_weight_counts_bytes_gz_more_and_skips_what_is_not_read(tmp_path):
    plain = _file(tmp_path / "a.log", 1000)
    packed = _file(tmp_path / "b.log.gz", 1000, gz=True)
    gz_size = (tmp_path / "b.log.gz").stat().st_size
    assert workers.corpus_weight([plain]) == 1000
    assert workers.corpus_weight([packed]) == gz_size * workers.GZ_FACTOR
    skipped = [str(tmp_path / "big.bin"), "binary file"]  # recorded, not read
    assert workers.corpus_weight([plain, skipped, str(tmp_path / "gone.log")]) == 1000


def test_weight_stops_at_the_limit(tmp_path, monkeypatch):
    paths = [_file(tmp_path / f"{i}.log", 100) for i in range(50)]
    seen = []
    real = workers.os.path.getsize
    monkeypatch.setattr(workers.os.path, "getsize", lambda p: seen.append(p) or real(p))
    assert workers.corpus_weight(paths, limit=250) == 300
    assert len(seen) == 3  # a large corpus is not stat-ed to the end


@pytest.mark.parametrize(("size", "cores", "expected"), [
    (999, 2, 1), (1000, 2, 2), (5000, 4, 4), (5000, 1, 1), (0, 8, 1)])
def test_default_is_one_below_the_threshold_and_every_core_above(tmp_path, size, cores,
                                                                 expected):
    paths = [_file(tmp_path / "x.log", size)]
    assert workers.default_workers(paths, threshold=1000, cores=cores) == expected


def test_explicit_workers_and_remote_runners(tmp_path, monkeypatch):
    assert workers.PARALLEL_BYTES > 10_000_000  # the measured value is not a toy
    big = [_file(tmp_path / "x.log", 10)]
    monkeypatch.setattr(workers, "PARALLEL_BYTES", 5)
    monkeypatch.setattr(workers, "cpus", lambda: 2)
    assert workers.resolve(None, "DirectRunner", big) == 2
    assert workers.resolve(1, "DirectRunner", big) == 1  # --workers 1 is obeyed
    assert workers.resolve(3, "DirectRunner", []) == 3
    assert workers.resolve(None, "DataflowRunner", big) == 1  # sized by --beam-opt


def test_ingest_without_workers_flag_parses_the_sample_in_process(tmp_path, repo_root,
                                                                  monkeypatch):
    """The bundled sample (4.7 MB) is far below the crossover: one worker, in-process."""
    used = []
    real = beamrun.parse

    def spy(paths, staging, settings, runner, n, *rest):
        used.append(n)
        return real(paths, staging, settings, runner, n, *rest)

    monkeypatch.setattr(beamrun, "parse", spy)
    run.ingest([repo_root / "fixtures" / "sample" / "corpus"], tmp_path / "x.duckdb")
    assert used == [1]
    assert workers.default_workers([str(p) for p in (repo_root / "fixtures" / "sample"
                                                     / "corpus").rglob("*")
                                    if p.is_file()], cores=2) == 1


def test_the_guess_before_discovery_weighs_every_file_under_the_roots(tmp_path,
                                                                      monkeypatch):
    """``likely``: what ingest starts its fork server on, before discovery. A file
    discovery would pass over still weighs (the guess may only be too high), a URI
    weighs nothing (as in corpus_weight), ``--workers`` is taken as given."""
    monkeypatch.setattr(workers, "PARALLEL_BYTES", 1000)
    monkeypatch.setattr(workers, "cpus", lambda: 2)
    (tmp_path / "host" / "sub").mkdir(parents=True)
    _file(tmp_path / "host" / "kern.log", 600)
    _file(tmp_path / "host" / "sub" / "notes.bin", 500)
    alone = _file(tmp_path / "alone.log", 300)
    cases = [
        ([tmp_path / "host"], None, 2),  # 600 + 500 under a directory, nested
        ([tmp_path / "host" / "kern.log"], None, 1),  # a file named alone
        ([tmp_path / "host" / "kern.log", alone], None, 1),  # 900
        ([tmp_path / "host" / "kern.log", alone, "s3://bucket/logs"], None, 1),
        ([tmp_path / "host"], 1, 1),
        ([alone], 3, 3),
    ]
    for roots, given, expected in cases:
        assert workers.likely(given, roots) == expected, (roots, given)
