"""Hardware entities in free text (drain reasons, admin comments, tickets, log lines).

``spacy.blank("en")`` with an ``entity_ruler`` for the entities themselves and a
``Matcher`` for the ones that are only recognizable by the word in front of them (the
code in ``Xid (PCI:0000:06:00): 79``, a 13-digit serial after ``SN``, a bare ticket
number after ``ticket``). No statistical model: every entity here has a fixed shape.

The tokenizer is adjusted so that each entity is one token where it can be: addresses
and names such as ``0000:c1:00.0``, ``leaf-r12-s3`` or ``mlx5_0:1`` are never split
(``token_match``), ``=`` always splits (``gpu=3`` -> ``gpu``, ``=``, ``3``), and the
emoticon exceptions that contain digits (``=3``, ``:1``, ``8)``) are dropped.

:func:`extract` returns every key of :data:`KEYS`, each a list of normalized values in
order of first appearance, without duplicates:

============  =====================================  ==============================
key           written as                             normalized
============  =====================================  ==============================
gpu           gpu3, GPU 3, GPU3_Temp, gpu=3, GPU #3,  3 (int)
              GPU slot 3; "slot 3" in a text that
              mentions a GPU
pci           0000:3b:00.0, PCI:0000:3b:00,           0000:3b:00.0 (normalize_pci)
              00000000:3B:00.0, +pci:0000:3b:00.0
ib_port       mlx5_3, mlx5_0:1, ib3, ib7:1, mlx5_bond_0, lowercase as written
              ibp12s0
gpu_serial    1650123456789 (13 digits, 16...);       the digits
              any 13-digit 1... after SN/serial
xid           xid 79, Xid 79, xid79, XID=79,          79 (int); 13/31 gives 13, 31
              Xid 13/31, gpu_lost_xid79,
              NVRM: Xid (PCI:0000:06:00): 79          (xid=0 is a count: dropped)
dimm          CPU1_DIMM_B2, DIMMD7, DIMM B2, CPU0_G1,  uppercase, spaces as ``_``
              CPU_SrcID#0_MC#3_Chan#0_DIMM#0
psu           PSU2, PSU 2, psu2, PS1                  PSU2 / PSU1
fan           FAN3, Fan 3, FAN1A                      FAN3 / FAN1A
nvme          nvme1n1, nvme0, nvme0n1p1               lowercase as written
switch        leaf-r12-s3, spine-03, leaf03,          lowercase as written
              tor-r12, sw-ib-12, core-sw01
ticket        INC-20417, CHG-12345, RMA-55012,        as written (number alone after
              ticket 48213, case #01234567            ticket/case/incident words)
============  =====================================  ==============================
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from faultline.pipeline.pci import normalize_pci

KEYS = ("gpu", "pci", "ib_port", "gpu_serial", "xid", "dimm", "psu", "fan", "nvme",
        "switch", "ticket")

# Shapes kept as one token (and matched by the single-token patterns below).
# With a domain only: a bare "3b:00.0" (lspci) is too close to a time such as "12:30.5".
_PCI_RX = r"(?:\+?[Pp][Cc][Ii]:)?[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_PORT_RX = r"mlx5_(?:bond_)?\d+(?::\d+)?|ib\d+(?::\d+)?|ibp\d+s\d+(?:f\d+)?(?:np\d+)?"
_SWITCH_RX = r"(?:(?:leaf|spine|tor|agg|ibsw|sw)(?:\d|[-_])|core[-_])[-_a-z0-9]*\d[-_a-z0-9]*"
_TICKET_RX = r"[A-Z][A-Z0-9]{1,9}-\d{3,}"
_WHOLE_RX = rf"{_PCI_RX}|(?i:{_PORT_RX})|(?i:{_SWITCH_RX})|{_TICKET_RX}"
_KEEP_WHOLE = re.compile(rf"^(?:{_WHOLE_RX})$")
# The same shapes inside a longer string ("peer=leaf-r33-s2", "leaf-r25-s6/P23"): infix
# splits are not made inside them.
_PROTECTED = re.compile(rf"(?<![\w.:+-])(?:{_WHOLE_RX})(?![\w:-])")


def _rx(pattern: str) -> dict:
    return {"TEXT": {"REGEX": pattern}}


_NUM_SEP = {"ORTH": {"IN": ["=", ":", "#"]}, "OP": "?"}

PATTERNS: list[dict] = [
    # GPU index
    {"label": "GPU", "pattern": [_rx(r"(?i)^gpu\d{1,2}(?:_[a-z]\w*)?$")]},
    {"label": "GPU", "pattern": [{"LOWER": "gpu"}, _NUM_SEP, _rx(r"^\d{1,2}$")]},
    {"label": "GPU", "pattern": [{"LOWER": "gpu"}, {"LOWER": {"IN": ["slot", "index", "idx"]}},
                                 _NUM_SEP, _rx(r"^\d{1,2}$")]},
    # PCI address
    {"label": "PCI", "pattern": [_rx(rf"^(?:{_PCI_RX})$")]},
    # IB / RoCE device or port
    {"label": "IB_PORT", "pattern": [_rx(rf"(?i)^(?:{_PORT_RX})$")]},
    # GPU board serial
    {"label": "GPU_SERIAL", "pattern": [_rx(r"^16\d{11}$")]},
    # Xid code
    {"label": "XID", "pattern": [_rx(r"(?i)(?:^|_)xid\d{1,3}(?:_|$)")]},
    {"label": "XID", "pattern": [{"LOWER": "xid"}, {"ORTH": {"IN": ["=", ":"]}, "OP": "?"},
                                 _rx(r"^\d{1,3}(?:/\d{1,3})*$")]},
    # DIMM slot
    {"label": "DIMM", "pattern": [_rx(r"(?i)^(?:\S*_)?DIMM(?:_?[A-Z]?\d{1,2}|#\d+)$")]},
    {"label": "DIMM", "pattern": [{"LOWER": "dimm"}, _rx(r"^[A-Ha-h]?\d{1,2}$")]},
    {"label": "DIMM", "pattern": [_rx(r"(?i)^CPU\d_[A-H]\d{1,2}$")]},  # SEL: (CPU0_G1)
    # power supply
    {"label": "PSU", "pattern": [_rx(r"(?i)^psu\d{1,2}$")]},
    {"label": "PSU", "pattern": [_rx(r"^PS\d{1,2}$")]},
    {"label": "PSU", "pattern": [{"LOWER": "psu"}, _NUM_SEP, _rx(r"^\d{1,2}$")]},
    # fan
    {"label": "FAN", "pattern": [_rx(r"(?i)^fan\d{1,2}[a-b]?$")]},
    {"label": "FAN", "pattern": [{"LOWER": "fan"}, _NUM_SEP, _rx(r"^\d{1,2}[a-bA-B]?$")]},
    # local NVMe device
    {"label": "NVME", "pattern": [_rx(r"(?i)^nvme\d+(?:n\d+(?:p\d+)?)?$")]},
    # fabric switch
    {"label": "SWITCH", "pattern": [_rx(rf"(?i)^(?:{_SWITCH_RX})$")]},
    # ticket / case / change id
    {"label": "TICKET", "pattern": [_rx(rf"^(?:{_TICKET_RX})$")]},
]

# Values recognizable only by context: (key, pattern); the value is the last token.
CONTEXT_PATTERNS: list[tuple[str, list[dict]]] = [
    # NVRM: Xid (PCI:0000:06:00): 79, ...   and   Xid (PCI:0000:06:00 GPU-I:05): 48
    ("xid", [{"LOWER": "xid"}, {"ORTH": "("}, {"ORTH": {"NOT_IN": [")", "):"]}, "OP": "+"},
             {"ORTH": {"IN": ["):", ")"]}}, {"ORTH": ":", "OP": "?"}, _rx(r"^\d{1,3}$")]),
    # SN 1321234567890, serial=..., Board Serial Number: ...
    ("gpu_serial", [{"LOWER": {"IN": ["sn", "s/n", "serial", "serial_number"]}},
                    {"LOWER": "number", "OP": "?"}, _NUM_SEP, _rx(r"^1\d{12}$")]),
    # "slot 6" where the text is about a GPU (see _collect)
    ("gpu_slot", [{"LOWER": {"NOT_IN": ["pcie", "pci", "dimm", "psu", "fan", "nvme", "drive",
                                        "disk", "nic", "riser", "cpu", "memory"]}},
                  {"LOWER": "slot"}, _NUM_SEP, _rx(r"^\d{1,2}$")]),
    # ticket 48213, case #01234567, incident: 4821337
    ("ticket", [{"LOWER": {"IN": ["ticket", "case", "incident", "change", "chg", "sr"]}},
                _NUM_SEP, _rx(r"^#?\d{4,12}$")]),
]


def _first_int(text: str) -> int:
    return int(re.search(r"\d+", text).group())  # type: ignore[union-attr]


def _normalize(key: str, text: str) -> list[object]:
    """The normalized value(s) of one matched span."""
    if key == "gpu":
        return [int(re.search(r"(\d{1,2})(?:_\w*)?$", text).group(1))]  # type: ignore[union-attr]
    if key == "pci":
        v = normalize_pci(text)
        return [v] if v else []
    if key == "xid":
        m = re.search(r"(?i)xid\D{0,3}(\d{1,3}(?:/\d{1,3})*)", text)
        codes = m.group(1) if m else text.split()[-1]
        return [int(c) for c in re.findall(r"\d+", codes) if int(c) > 0]  # xid=0: none
    if key == "gpu_serial":
        return [re.search(r"1\d{12}", text).group()]  # type: ignore[union-attr]
    if key == "psu":
        return [f"PSU{_first_int(text)}"]
    if key == "fan":
        m = re.search(r"(\d{1,2})([a-bA-B]?)\s*$", text)
        return [f"FAN{int(m.group(1))}{m.group(2).upper()}"] if m else []
    if key == "dimm":
        return [re.sub(r"\s+", "_", text.upper())]
    if key == "ticket":
        return [text.split()[-1].lstrip("#")]
    return [text.lower()]  # ib_port, nvme, switch


@cache
def _pipeline():
    """The spaCy pipeline and the context matcher (built once per process)."""
    import spacy
    from spacy.matcher import Matcher
    from spacy.util import compile_infix_regex

    nlp = spacy.blank("en")
    tok = nlp.tokenizer
    tok.token_match = _KEEP_WHOLE.match
    infixes = compile_infix_regex([*nlp.Defaults.infixes, r"="])

    def infix_finditer(string: str):
        keep = [m.span() for m in _PROTECTED.finditer(string)]
        return [m for m in infixes.finditer(string)
                if not any(a <= m.start() < b or a < m.end() <= b for a, b in keep)]

    tok.infix_finditer = infix_finditer
    # Emoticons with digits ("=3", ":1", "8)") would glue "gpu=3" back into "=3".
    tok.rules = {k: v for k, v in tok.rules.items()
                 if not re.search(r"\d", k) or re.fullmatch(r"\d+[ap]\.?m\.?", k)}
    ruler = nlp.add_pipe("entity_ruler", config={"validate": True})
    ruler.add_patterns(PATTERNS)
    matcher = Matcher(nlp.vocab, validate=True)
    for i, (key, pattern) in enumerate(CONTEXT_PATTERNS):
        matcher.add(f"{key}#{i}", [pattern])
    return nlp, matcher


def _collect(doc, matcher) -> dict[str, list]:
    out: dict[str, list] = {k: [] for k in KEYS}
    found: list[tuple[int, str, str]] = []  # (start char, key, text)
    for ent in doc.ents:
        found.append((ent.start_char, ent.label_.lower(), ent.text))
    about_gpu = any(t.lower_ in ("gpu", "gpus", "[gpu]") for t in doc)
    for match_id, _start, end in matcher(doc):
        key = doc.vocab.strings[match_id].split("#")[0]
        if key == "gpu_slot":  # a bare slot number is a GPU index only in GPU talk
            if not about_gpu:
                continue
            key = "gpu"
        last = doc[end - 1]  # the value; the tokens before it are its context
        found.append((last.idx, key, last.text))
    for _, key, text in sorted(found):
        for v in _normalize(key, text):
            if v not in out[key]:
                out[key].append(v)
    return out


def extract(text: str) -> dict[str, list]:
    """Hardware entities in ``text``: every key of :data:`KEYS`, lists of values."""
    nlp, matcher = _pipeline()
    return _collect(nlp(text or ""), matcher)


def extract_many(texts: Iterable[str], batch_size: int = 256) -> list[dict[str, list]]:
    """:func:`extract` over many texts (one ``nlp.pipe`` pass)."""
    nlp, matcher = _pipeline()
    return [_collect(doc, matcher)
            for doc in nlp.pipe((t or "" for t in texts), batch_size=batch_size)]
