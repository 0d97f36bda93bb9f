"""``hosts.csv`` (optional): a host's other names and addresses; and the name resolver.

::

    host,aliases,addresses
    node0042,node0042.cluster.local;node0042-bmc,10.1.2.42;10.2.2.42

Read by its header (``host``/``hostname``/``name``/``node``, ``aliases``/``alias``/
``names``, ``addresses``/``address``/``ips``/``ip``; any case). Without a recognizable
header the columns are taken in that order. List cells may separate items with ``;``,
``,`` (quoted), ``|`` or spaces. One ``host_alias`` event per row (untimed; attrs
``host``, ``aliases``, ``addresses``). Blank and ``#`` comment lines are routine; a row
without a host is rejected (``hosts_no_host``).

:func:`build_resolver` ties every name and address (hosts.csv rows, NCCL bootstrap lines)
to one canonical host name.
"""

from __future__ import annotations

import csv
import functools
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from faultline.pipeline.parsers.joblog import cap
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines

HOST_COLUMNS = ("host", "hostname", "name", "node", "nodename")
ALIAS_COLUMNS = ("aliases", "alias", "names", "other_names")
ADDRESS_COLUMNS = ("addresses", "address", "addrs", "ips", "ip")
_ITEM_SPLIT = re.compile(r"[;,|\s]+")


def split_items(cell: str | None) -> list[str]:
    """A list cell's items, in order, without blanks or repeats."""
    out: list[str] = []
    for item in _ITEM_SPLIT.split(cell or ""):
        item = item.strip().strip("\"'")
        if item and item not in out:
            out.append(item)
    return out


def _column(header: list[str], names: tuple[str, ...]) -> int | None:
    lowered = [h.strip().lower().lstrip("#").strip() for h in header]
    for name in names:
        if name in lowered:
            return lowered.index(name)
    return None


def _split_row(line: str) -> list[str]:
    if "," in line or '"' in line:
        return next(csv.reader([line], skipinitialspace=True))
    return line.split("\t") if "\t" in line else [line]


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one hosts.csv (see the module docstring)."""
    lines = split_lines(text)
    fp = FileParse(lines=len(lines), shape="csv")
    cols: tuple[int, int | None, int | None] | None = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        try:
            row = _split_row(stripped)
        except csv.Error:
            fp.rejects.append(Reject.of(i + 1, "hosts_bad_csv", line))
            continue
        if cols is None and (h := _column(row, HOST_COLUMNS)) is not None:
            cols = (h, _column(row, ALIAS_COLUMNS), _column(row, ADDRESS_COLUMNS))
            continue  # the header row is routine
        if stripped.startswith("#"):
            continue
        if cols is None:
            cols = (0, 1, 2)
        h, al, ad = cols
        host = row[h].strip() if h < len(row) else ""
        if not host:
            fp.rejects.append(Reject.of(i + 1, "hosts_no_host", line))
            continue
        aliases = split_items(row[al]) if al is not None and al < len(row) else []
        addresses = split_items(row[ad]) if ad is not None and ad < len(row) else []
        if cols == (0, 1, 2) and len(row) > 3:  # headerless, unquoted extra cells
            addresses += [x for c in row[3:] for x in split_items(c) if x not in addresses]
        fp.events.append(ParsedEvent(
            line_no=i + 1, kind="host_alias", message=cap(line), host=host,
            attrs={"host": host, "aliases": aliases, "addresses": addresses},
        ))
    return fp


# --- the resolver ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 16)  # a pure function of the name; corpora repeat names
def normalize_name(name: str) -> str:
    """A host name or address as a lookup key: lower case; ``10.1.4.17<51234>`` and
    ``::ffff:10.1.4.17`` become ``10.1.4.17``; ``[fe80::1]`` loses its brackets."""
    key = name.strip().lower()
    key = re.sub(r"<\d*>$", "", key)
    key = key.strip("[]")
    if key.startswith("::ffff:") and "." in key:
        key = key[len("::ffff:"):]
    try:
        return str(ipaddress.ip_address(key.split("%", 1)[0]))
    except ValueError:
        return key.rstrip(".")


@dataclass(slots=True)
class HostResolver:
    """Names and addresses -> canonical host. Picklable; build with :func:`build_resolver`."""

    names: dict[str, str] = field(default_factory=dict)
    conflicts: list[tuple[str, str, str]] = field(default_factory=list)  # key, kept, other

    def add(self, key: str, host: str) -> None:
        k = normalize_name(key)
        if not k:
            return
        kept = self.names.setdefault(k, host)
        if kept != host:
            self.conflicts.append((k, kept, host))

    def resolve(self, name: str | None) -> str | None:
        """The canonical host for a name or address; unknown names come back as given
        (FQDNs shortened when the short name is known); None stays None."""
        if name is None:
            return None
        k = normalize_name(name)
        if k in self.names:
            return self.names[k]
        short = k.split(".", 1)[0]
        if "." in k and not _is_ip(k) and short in self.names:
            return self.names[short]
        return name

    def __contains__(self, name: str) -> bool:
        return normalize_name(name) in self.names


def _is_ip(key: str) -> bool:
    try:
        ipaddress.ip_address(key)
    except ValueError:
        return False
    return True


def build_resolver(events: Iterable[ParsedEvent]) -> HostResolver:
    """A resolver from ``host_alias`` events (hosts.csv) and ``nccl_bootstrap`` events
    (``attrs['address']`` of the line's host). hosts.csv wins: its rows are applied
    first; a name claimed by two hosts keeps the first and is listed in ``conflicts``.
    """
    aliases: list[ParsedEvent] = []
    bootstraps: list[ParsedEvent] = []
    for e in events:
        if e.kind == "host_alias":
            aliases.append(e)
        elif e.kind == "nccl_bootstrap" and e.host:
            bootstraps.append(e)
    r = HostResolver()
    for e in aliases:
        host = e.attrs.get("host") or e.host
        if not host:
            continue
        r.add(host, host)
    for e in aliases:
        host = e.attrs.get("host") or e.host
        if not host:
            continue
        for name in (*e.attrs.get("aliases", ()), *e.attrs.get("addresses", ())):
            r.add(name, host)
    bootstraps.sort(key=lambda e: (e.ts is None, e.ts or 0, e.host or "", e.line_no))
    for e in bootstraps:
        host = r.resolve(e.host) or e.host or ""
        r.add(host, host)
        if addr := e.attrs.get("address"):
            r.add(addr, host)
    return r
