"""How the listing of paths is cut into batches: the batch size and the listing's order.

Beam-free (the driver writes the listing in :func:`spread` order without importing
Beam, :mod:`faultline.pipeline.beamrun`); :mod:`faultline.pipeline.transforms`
re-exports both names.
"""

from __future__ import annotations

import math

# Paths per batch (a Beam element, a Dask task): enough that a batch of ~3 KB job logs
# pays its Parquet shards and polars calls once per thousand files (write cost per
# file 22 us at 256, 16 us at 1024 on llama3's job logs), see MAX_PARSE_BYTES for big files.
BATCH_SIZE = 1024


def even_size(n: int, most: int = BATCH_SIZE, workers: int = 1) -> int:
    """The batch size that cuts ``n`` paths into batches of at most ``most``, as equal
    as they come and as many as a multiple of ``workers``.

    The local runner deals the batches to its workers round-robin up front (see
    :func:`spread`), so the parse ends when the worker with the most paths ends: cut
    at ``most`` each, small x4's 11,864 files made eleven batches of 1,024 and one of
    600, and a listing of 13 batches on two workers gave one of them a whole batch
    more. Here 12 batches of 989 (the last 985), and 14 of 893 for 12,500 files."""
    if n <= 0:
        return most
    workers = max(1, workers)
    count = math.ceil(math.ceil(n / most) / workers) * workers
    return max(1, math.ceil(n / count))


def spread(paths: list) -> list:
    """``paths`` in a golden-ratio stride order: item ``i`` is ``paths[i * s % n]``
    with ``s`` about ``n / phi`` and prime to ``n``, so every run of consecutive items
    (any batch, however the batcher aligns it) samples the whole listing evenly.

    The listing is sorted, so a directory of big kernel logs would otherwise be a few
    heavy batches among thousands of light ones, and the local runner deals whole
    batches to its workers round-robin up front (Beam's ``GroupingBuffer.partition``):
    one worker got the heavy ones while the other idled at the end. Deterministic: the
    same listing gives the same batches, so a retried batch writes the same shards."""
    n = len(paths)
    if n < 3:
        return list(paths)
    s = round(n * 0.6180339887498949)
    while math.gcd(s, n) != 1:
        s += 1
    return [paths[i * s % n] for i in range(n)]
