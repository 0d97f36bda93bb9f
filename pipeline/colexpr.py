"""Polars expressions that give exactly what the per-event Python gives: an ISO stamp's
epoch microseconds (:func:`faultline.pipeline.timeutil.parse_iso` and ``in_range``) and
a string as ``json.dumps`` writes it. The job-log fast lanes build their events' columns
with them (:mod:`faultline.pipeline.parsers.joblog_lanes`); ``tests/test_colexpr.py``
checks both against the Python they stand for, hostile values included.
"""

from __future__ import annotations

import polars as pl

from faultline.pipeline.timeutil import TS_MAX_US, TS_MIN_US

# the collector stamp joblog_lanes takes (ASCII digits): its fields as groups
_ISO_GROUPS = (r"^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
               r"(?:[.,]([0-9]{1,9}))?(Z|[+-][0-9]{2}:?[0-9]{2})?$")
_DAY_US = 86_400_000_000


def _days_from_civil(y: pl.Expr, m: pl.Expr, d: pl.Expr) -> pl.Expr:
    """Days since 1970-01-01 of a proleptic Gregorian date (year >= 1), H. Hinnant's
    ``days_from_civil``: integer arithmetic only."""
    yy = y - (m <= 2).cast(pl.Int64)
    era = yy // 400
    yoe = yy - era * 400
    mp = pl.when(m > 2).then(m - 3).otherwise(m + 9)
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _days_in_month(y: pl.Expr, m: pl.Expr) -> pl.Expr:
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    return (pl.when(m == 2).then(28 + leap.cast(pl.Int64))
            .when(m.is_in([4, 6, 9, 11])).then(30).otherwise(31))


# the collector's own layout (what timeutil's ``_utc_micro`` reads), nearly every stamp
_UTC_MICRO = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$"
_UTC_MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S%.6fZ"


def with_iso_us(frame: pl.DataFrame, stamp: str, utc_local: str, ts: str = "ts",
                zoned: str = "zoned") -> pl.DataFrame:
    """``frame`` with columns ``ts`` (epoch us of ISO stamp column ``stamp`` as
    ``parse_iso`` reads it; null where ``parse_iso`` gives None or ``in_range``
    refuses it) and ``zoned`` (the stamp carries a zone); rows in another order.

    Stamps of the collector's layout (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) go through
    polars' ``strptime`` (chrono): its checks are ``datetime``'s but one, a leap
    second ``:60`` that chrono reads and Python refuses, refused here. The others
    are read field by field (:func:`_with_iso_us`)."""
    fast = frame[stamp].str.contains(_UTC_MICRO)
    quick = frame.filter(fast) if not fast.all() else frame
    quick = quick.with_columns(pl.col(stamp).str.strptime(
        pl.Datetime("us"), _UTC_MICRO_FORMAT, strict=False, exact=True, cache=False,
    ).cast(pl.Int64).alias(ts))
    us = pl.col(ts)  # a column of its own: an expression used twice is computed twice
    quick = quick.with_columns(
        pl.when((pl.col(stamp).str.slice(17, 2) != "60") & (us >= TS_MIN_US)
                & (us < TS_MAX_US)).then(us).alias(ts),
        pl.lit(True).alias(zoned),
    )
    if quick.height == frame.height:
        return quick
    return pl.concat([quick, _with_iso_us(frame.filter(~fast), stamp, utc_local, ts, zoned)])


def _with_iso_us(frame: pl.DataFrame, stamp: str, utc_local: str, ts: str = "ts",
                 zoned: str = "zoned") -> pl.DataFrame:
    """:func:`with_iso_us` of any stamp, field by field. A stamp without a zone is
    read as UTC where column ``utc_local`` (the file's zone is ``UTC``) is true and is
    null elsewhere: a zone's rules stay with Python's zoneinfo (the caller reads those
    lines the general way). A fraction is cut, not rounded, to microseconds; an offset
    is valid below 24 h (``datetime.timezone``). Staged (one ``with_columns`` per
    step) so that the stamp's regex runs once."""
    tmp = [f"_iso{k}" for k in range(8)]
    out = frame.with_columns(pl.col(stamp).str.extract_groups(_ISO_GROUPS).alias("_iso"))
    f = [pl.col("_iso").struct.field(str(k)) for k in range(1, 9)]
    out = out.with_columns(
        *(x.cast(pl.Int64).alias(t) for x, t in zip(f[:6], tmp, strict=False)),
        f[6].str.slice(0, 6).str.pad_end(6, "0").cast(pl.Int64).fill_null(0).alias(tmp[6]),
        f[7].alias(tmp[7]),
    ).drop("_iso")
    y, mo, d, h, mi, s, frac, zone = (pl.col(t) for t in tmp)
    out = out.with_columns(
        (zone.str.slice(1, 2).cast(pl.Int64, strict=False) * 60
         + zone.str.slice(-2, 2).cast(pl.Int64, strict=False)).alias("_off"),
        (zone.is_null() | (zone == "Z")).alias("_utc"),
    )
    off, utc = pl.col("_off"), pl.col("_utc")
    sign = pl.when(zone.str.starts_with("-")).then(-1).otherwise(1)
    valid = ((y >= 1) & (mo >= 1) & (mo <= 12) & (d >= 1) & (d <= _days_in_month(y, mo))
             & (h <= 23) & (mi <= 59) & (s <= 59) & (utc | (off < 24 * 60))
             & (zone.is_not_null() | pl.col(utc_local)))
    us = (_days_from_civil(y, mo, d) * _DAY_US + ((h * 60 + mi) * 60 + s) * 1_000_000
          + frac - pl.when(utc).then(0).otherwise(sign * off * 60_000_000))
    out = out.with_columns(us.alias("_us"), valid.fill_null(False).alias("_ok"))
    u = pl.col("_us")
    return out.with_columns(
        pl.when(pl.col("_ok") & (u >= TS_MIN_US) & (u < TS_MAX_US)).then(u).alias(ts),
        zone.is_not_null().alias(zoned),
    ).drop(*tmp, "_off", "_utc", "_us", "_ok")


# json.dumps's escapes of the ASCII characters it escapes (ensure_ascii: the controls and DEL)
_JSON_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t",
                 "\b": "\\b", "\f": "\\f",
                 **{chr(c): f"\\u{c:04x}" for c in (*range(32), 127) if chr(c) not in "\n\r\t\b\f"}}


def json_ascii(text: pl.Expr) -> pl.Expr:
    """An ASCII string as ``json.dumps`` writes it, quotes included. Characters
    beyond ASCII are NOT escaped (``json.dumps`` would write ``\\uXXXX``): callers
    pass only ASCII (the lanes' patterns admit nothing else)."""
    body = text.str.replace_many(list(_JSON_ESCAPES), list(_JSON_ESCAPES.values()))
    return pl.concat_str(pl.lit('"'), body, pl.lit('"'))


def json_object(fields: dict[str, tuple[str, pl.Expr]]) -> pl.Expr:
    """``json.dumps(d, sort_keys=True)`` of a dict, given as key -> (kind, expression):
    kind ``"str"`` is escaped (:func:`json_ascii`), ``"int"`` written as Python's
    ``str`` writes it; a trailing ``?`` (``"int?"``) writes a null value as ``null``
    (``d[key] = None``), a trailing ``-`` leaves the key out where the value is null
    (no such key in ``d``; never the first key). Keys are plain ASCII names."""
    parts: list[pl.Expr | str] = []
    for n, key in enumerate(sorted(fields)):
        kind, expr = fields[key]
        base = kind.rstrip("?-")
        value = json_ascii(expr) if base == "str" else expr.cast(pl.Int64).cast(pl.String)
        head = pl.lit(("{" if n == 0 else ", ") + f'"{key}": ')
        if kind.endswith("-"):
            if n == 0:
                raise ValueError(f"an optional key cannot come first: {key}")
            parts.append(pl.concat_str(head, value).fill_null(""))
            continue
        parts.append(head)
        parts.append(value.fill_null("null") if kind.endswith("?") else value)
    parts.append(pl.lit("}"))
    return pl.concat_str(parts)
