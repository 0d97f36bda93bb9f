"""How many worker processes an ingest uses when ``--workers`` is not given.

Beam's multi-process mode costs a fixed start-up (worker processes, the gRPC harness:
about 2-3 s on the 2-core CI machine) and then parses on every core. Below a certain
amount of data the start-up costs more than the second core saves, so a small corpus
is parsed in-process with one worker and a large one on every core. Both ways run the
same pipeline code and write the same tables
(``tests/test_hostile_corpus.py::test_two_workers_give_the_tables_of_one``).

Measured with ``python bench/workers.py`` on the ``small`` preset stretched 1-16 times
(bench/RESULTS.md, "Default workers"): one worker wins at 50 MB; two won at 200 MB
(7.9 s against 9.2 s) while the machine's other load was about one core. With other
jobs keeping both cores busy (load average 3-4), two workers lost at every size up to
810 MB (by 3-15%): a second process only pays with a free core. The threshold is the
smallest size at which two workers were measured to win.

Re-measured (session 6) once the workers were forked from a server that has imported
Beam already (:mod:`faultline.pipeline.forkserver`): two workers still lost at 5, 50
and 100 MB (sample 4.1-4.7 s against 2.5-2.8 s; 100 MB 7.3 s against 5.3 s at load
2) and won at 200 MB only with a free core (7.3 s against 8.2 s at load 3; 14.6 s
against 12.3 s at load 11). The multi-process mode's remaining fixed cost (Beam's
gRPC harness, polars and the parsers imported in each worker, a server that has not
finished importing when a small corpus's discovery is already done) is still about
1.5-2 s, so the threshold stays where it was.

:func:`likely` makes the same decision from the file sizes under the corpus roots
before discovery: ``ingest`` starts its fork server only when a run will most likely
use more than one worker (one started for a one-worker run cost that run about
0.8 CPU s).

The size is the bytes the run must read, gzip files counted :data:`GZ_FACTOR` times
(their text is several times their size: 6.6 times on the simulator's job logs). The
sum stops at the threshold, so a large corpus is not stat-ed to the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

LOCAL_RUNNERS = ("DirectRunner", "direct", "FnApiRunner")  # where --workers means processes
PARALLEL_BYTES = 200_000_000  # measured, bench/workers.py (see module doc)
GZ_FACTOR = 6


def cpus() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


POLARS_THREADS = "POLARS_MAX_THREADS"  # the size of polars' pool, read once, at its import


def polars_threads(workers: int, cores: int | None = None) -> int:
    """Threads for the polars pool of each of ``workers`` processes that parse side
    by side: the cores shared out, at least one each.

    Polars sizes its pool to the machine, so each of two workers on two cores had two
    threads: four threads taking turns on two cores, each parallel polars call paying
    their hand-offs. Small x4 on two workers, five runs each in turn: 4.81-5.32 s
    (mean 5.03) with one thread each, 5.03-5.76 s (mean 5.21) with two; user + system
    CPU 7.45-8.47 s against 7.72-8.82 s. On a machine of many cores and a few
    workers, each still gets several."""
    cores = cpus() if cores is None else cores
    return max(1, cores // max(1, workers))


def corpus_weight(paths: Iterable[str | list[str]], limit: float = float("inf")) -> int:
    """Bytes to read (``.gz`` counted :data:`GZ_FACTOR` times), summed up to ``limit``.

    Entries that are ``[path, reason]`` (files recorded but not read) weigh nothing; a
    file that vanished since discovery weighs nothing either.
    """
    total = 0
    for p in paths:
        if isinstance(p, dict):  # a grown file (resume.py): its size is the upper bound
            p = p["path"]
        if not isinstance(p, str):
            continue
        try:
            size = os.path.getsize(p)  # noqa: PTH202 (a str path per file: no Path objects)
        except OSError:
            continue
        total += size * (GZ_FACTOR if p.endswith(".gz") else 1)
        if total >= limit:
            break
    return total


def default_workers(paths: Iterable[str | list[str]], threshold: int | None = None,
                    cores: int | None = None, weight: int | None = None) -> int:
    """1 below ``threshold`` (default :data:`PARALLEL_BYTES`) bytes to read, every core
    at or above it. ``weight``: the paths' :func:`corpus_weight`, if the caller has it
    (summed up to ``threshold`` at least)."""
    threshold = PARALLEL_BYTES if threshold is None else threshold
    cores = cpus() if cores is None else cores
    if cores <= 1:
        return 1
    if weight is None:
        weight = corpus_weight(paths, limit=threshold)
    return cores if weight >= threshold else 1


def walk(roots: Iterable[str | os.PathLike[str]]) -> Iterator[str]:
    """Every file under local ``roots`` (URIs skipped), lazily: a first guess at the
    corpus, before discovery has decided which files are logs."""
    for root in roots:
        root = os.fspath(root)
        if "://" in root:
            continue
        if not os.path.isdir(root):  # noqa: PTH112 (str paths, as corpus_weight's)
            yield root
            continue
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                yield os.path.join(dirpath, name)  # noqa: PTH118


def likely(workers: int | None, roots: Iterable[str | os.PathLike[str]]) -> int:
    """The worker count a local run on ``roots`` will most likely resolve to, known
    before discovery (``ingest`` decides whether to start its fork server from it):
    ``workers`` if given, else :func:`default_workers` of every file under the roots,
    which weigh at least what discovery keeps of them. Summing stops at the threshold,
    so a large corpus costs a few thousand ``stat`` calls."""
    return workers if workers is not None else default_workers(walk(roots))


def resolve(workers: int | None, runner: str, paths: Iterable[str | list[str]],
            weight: int | None = None) -> int:
    """``workers`` if given; else :func:`default_workers` on a local runner (``weight``:
    the paths' weight if known), and 1 on a remote one (Dataflow, Flink, Spark size
    themselves through ``--beam-opt``)."""
    if workers is not None:
        return workers
    return default_workers(paths, weight=weight) if runner in LOCAL_RUNNERS else 1
