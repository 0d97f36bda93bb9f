"""Read a pickle without unpickling it: an opcode interpreter that builds only plain data.

PyTorch's Flight Recorder writes its dumps as pickles. ``pickle.load`` on a file from a
corpus runs whatever the file names (``os.system`` is one ``GLOBAL`` + ``REDUCE`` away),
so nothing read here ever goes through :mod:`pickle`'s loader. :func:`loads` walks the
opcodes itself (the opcode set of :mod:`pickletools`, protocols 0-5) and builds only
``dict``, ``list``, ``tuple``, ``str``, ``bytes``, ``int``, ``float``, ``bool`` and
``None``. Nothing is imported and no callable from the data is ever called.

The one exception is data, not code: TorchScript's IValue pickler (``pickle_str``,
which writes the dumps) wraps a typed list as ``torch.jit._pickle.build_intlist([...])``
(and the float, bool and type-tag variants); the dumps hold generic lists today, but a
typed one is no reason to refuse a dump. Those few names are matched as strings and replaced by this
module's own rebuild of the plain list, checked for its element type; any other global,
and every object-building opcode (``INST``, ``OBJ``, ``NEWOBJ``, ``BUILD``,
``PERSID``, extension codes, out-of-band buffers), is refused with
:class:`UnsafePickle`. Size, item count and nesting depth are bounded.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

MAX_BYTES = 1 << 30
MAX_ITEMS = 50_000_000  # objects built, in all
MAX_DEPTH = 64  # container nesting


class UnsafePickle(ValueError):
    """The data is not a pickle of plain containers and scalars (the reason says why)."""


class _Mark:
    __slots__ = ()


_MARK = _Mark()


def _typed_list(kind: tuple[type, ...], name: str) -> Callable[[list], list]:
    def build(items: list) -> list:
        if not isinstance(items, list) or not all(
                isinstance(x, kind) and not (bool not in kind and isinstance(x, bool))
                for x in items):
            raise UnsafePickle(f"{name} over something other than a plain list")
        return items
    return build


def _restore_type_tag(value: object, _tag: object = None) -> object:
    if not isinstance(value, (dict, list)):
        raise UnsafePickle("restore_type_tag over something other than a dict or list")
    return value


# The only globals a dump may name: TorchScript's typed-list wrappers, rebuilt here.
_BUILDERS: dict[tuple[str, str], Callable[..., object]] = {
    ("torch.jit._pickle", "build_intlist"): _typed_list((int,), "build_intlist"),
    ("torch.jit._pickle", "build_doublelist"): _typed_list((float,), "build_doublelist"),
    ("torch.jit._pickle", "build_floatlist"): _typed_list((float,), "build_floatlist"),
    ("torch.jit._pickle", "build_boollist"): _typed_list((bool,), "build_boollist"),
    ("torch.jit._pickle", "build_genericlist"): _typed_list(
        (int, float, str, bool, type(None), list, dict, tuple), "build_genericlist"),
    ("torch.jit._pickle", "restore_type_tag"): _restore_type_tag,
}


class _Builder:
    """A global this module rebuilds itself (see :data:`_BUILDERS`), never imports."""

    __slots__ = ("fn", "name")

    def __init__(self, module: str, name: str) -> None:
        fn = _BUILDERS.get((module, name))
        if fn is None:
            raise UnsafePickle(f"refused global {module}.{name}")
        self.fn = fn
        self.name = f"{module}.{name}"


_INT = struct.Struct("<i")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct(">d")
_REFUSED = {
    b"i": "INST", b"o": "OBJ", b"\x81": "NEWOBJ", b"\x92": "NEWOBJ_EX", b"b": "BUILD",
    b"P": "PERSID", b"Q": "BINPERSID", b"\x82": "EXT1", b"\x83": "EXT2", b"\x84": "EXT4",
    b"\x96": "BYTEARRAY8", b"\x97": "NEXT_BUFFER", b"\x98": "READONLY_BUFFER",
    b"\x8f": "EMPTY_SET", b"\x90": "ADDITEMS", b"\x91": "FROZENSET",
}


def loads(data: bytes, *, max_bytes: int = MAX_BYTES, max_items: int = MAX_ITEMS,
          max_depth: int = MAX_DEPTH) -> object:
    """The plain value a pickle holds, or :class:`UnsafePickle` saying why not."""
    if len(data) > max_bytes:
        raise UnsafePickle(f"pickle over {max_bytes} bytes")
    try:
        value = _run(memoryview(data), max_items)
    except UnsafePickle:
        raise
    except (IndexError, KeyError, struct.error, UnicodeDecodeError, ValueError,
            TypeError, OverflowError) as e:
        raise UnsafePickle(f"damaged pickle ({type(e).__name__})") from None
    check_depth(value, max_depth)
    return value


def _run(buf: memoryview, max_items: int) -> object:
    stack: list = []
    marks: list[int] = []
    memo: dict[int, object] = {}
    pos, n, built = 0, len(buf), 0

    def pop_mark() -> list:
        start = marks.pop()
        items = stack[start:]
        del stack[start:]
        return items

    def take(k: int) -> bytes:
        nonlocal pos
        if pos + k > n:
            raise UnsafePickle("truncated pickle")
        out = bytes(buf[pos:pos + k])
        pos += k
        return out

    def line() -> str:
        nonlocal pos
        end = bytes(buf[pos:pos + 1 << 20]).find(b"\n")
        if end < 0:
            raise UnsafePickle("truncated pickle")
        out = bytes(buf[pos:pos + end]).decode("ascii")
        pos += end + 1
        return out

    while pos < n:
        op = bytes(buf[pos:pos + 1])
        pos += 1
        built += 1
        if built > max_items:
            raise UnsafePickle(f"pickle of over {max_items} items")
        if op == b"X":  # BINUNICODE
            stack.append(take(_U32.unpack(take(4))[0]).decode("utf-8", "surrogatepass"))
        elif op == b"\x8c":  # SHORT_BINUNICODE
            stack.append(take(buf[pos] + 1)[1:].decode("utf-8", "surrogatepass"))
        elif op == b"J":
            stack.append(_INT.unpack(take(4))[0])
        elif op == b"K":
            stack.append(take(1)[0])
        elif op == b"M":
            stack.append(_U16.unpack(take(2))[0])
        elif op == b"\x8a":  # LONG1
            stack.append(int.from_bytes(take(take(1)[0]), "little", signed=True))
        elif op == b"\x8b":  # LONG4
            size = _INT.unpack(take(4))[0]
            if size < 0:
                raise UnsafePickle("negative LONG4 size")
            stack.append(int.from_bytes(take(size), "little", signed=True))
        elif op == b"G":
            stack.append(_F64.unpack(take(8))[0])
        elif op in (b"q", b"r", b"p", b"\x94"):  # BINPUT, LONG_BINPUT, PUT, MEMOIZE
            key = (take(1)[0] if op == b"q" else _U32.unpack(take(4))[0] if op == b"r"
                   else int(line()) if op == b"p" else len(memo))
            memo[key] = stack[-1]
        elif op in (b"h", b"j", b"g"):  # BINGET, LONG_BINGET, GET
            key = (take(1)[0] if op == b"h" else _U32.unpack(take(4))[0] if op == b"j"
                   else int(line()))
            stack.append(memo[key])
        elif op == b"}":
            stack.append({})
        elif op == b"]":
            stack.append([])
        elif op == b")":
            stack.append(())
        elif op == b"(":
            marks.append(len(stack))
        elif op == b"u":  # SETITEMS
            items = pop_mark()
            d = stack[-1]
            if not isinstance(d, dict) or len(items) % 2:
                raise UnsafePickle("SETITEMS on something other than a dict")
            for i in range(0, len(items), 2):
                d[_key(items[i])] = items[i + 1]
        elif op == b"s":  # SETITEM
            v = stack.pop()
            k = stack.pop()
            if not isinstance(stack[-1], dict):
                raise UnsafePickle("SETITEM on something other than a dict")
            stack[-1][_key(k)] = v
        elif op == b"e":  # APPENDS
            items = pop_mark()
            if not isinstance(stack[-1], list):
                raise UnsafePickle("APPENDS on something other than a list")
            stack[-1].extend(items)
        elif op == b"a":
            v = stack.pop()
            if not isinstance(stack[-1], list):
                raise UnsafePickle("APPEND on something other than a list")
            stack[-1].append(v)
        elif op == b"t":
            stack.append(tuple(pop_mark()))
        elif op in (b"\x85", b"\x86", b"\x87"):  # TUPLE1..3
            k = op[0] - 0x84
            if len(stack) < k:
                raise UnsafePickle("stack underflow")
            items = tuple(stack[len(stack) - k:])
            del stack[len(stack) - k:]
            stack.append(items)
        elif op == b"l":
            stack.append(pop_mark())
        elif op == b"d":
            items = pop_mark()
            if len(items) % 2:
                raise UnsafePickle("odd DICT")
            stack.append({_key(items[i]): items[i + 1] for i in range(0, len(items), 2)})
        elif op == b"N":
            stack.append(None)
        elif op == b"\x88":
            stack.append(True)
        elif op == b"\x89":
            stack.append(False)
        elif op == b"C":  # SHORT_BINBYTES
            stack.append(take(take(1)[0]))
        elif op == b"B":
            stack.append(take(_U32.unpack(take(4))[0]))
        elif op == b"\x8e":  # BINBYTES8
            stack.append(take(_U64.unpack(take(8))[0]))
        elif op == b"\x8d":  # BINUNICODE8
            stack.append(take(_U64.unpack(take(8))[0]).decode("utf-8", "surrogatepass"))
        elif op == b"U":  # SHORT_BINSTRING
            stack.append(take(take(1)[0]).decode("latin-1"))
        elif op == b"T":
            stack.append(take(_INT.unpack(take(4))[0]).decode("latin-1"))
        elif op == b"I":  # INT (protocol 0; also True/False as 01/00)
            text = line()
            stack.append(True if text == "01" else False if text == "00" else int(text))
        elif op == b"L":
            stack.append(int(line().rstrip("L")))
        elif op == b"F":
            stack.append(float(line()))
        elif op == b"V":  # UNICODE (raw-unicode-escape: only \\u escapes are honoured)
            stack.append(line().encode("ascii").decode("raw_unicode_escape"))
        elif op == b"0":
            if marks and marks[-1] == len(stack):
                marks.pop()
            else:
                stack.pop()
        elif op == b"1":  # POP_MARK
            pop_mark()
        elif op == b"2":  # DUP
            stack.append(stack[-1])
        elif op == b"c":  # GLOBAL module\nname\n: never imported
            module = line()
            stack.append(_Builder(module, line()))
        elif op == b"\x93":  # STACK_GLOBAL
            name, module = stack.pop(), stack.pop()
            if not isinstance(module, str) or not isinstance(name, str):
                raise UnsafePickle("STACK_GLOBAL of non-strings")
            stack.append(_Builder(module, name))
        elif op == b"R":  # REDUCE: only on this module's own builders
            args = stack.pop()
            fn = stack.pop()
            if not isinstance(fn, _Builder) or not isinstance(args, tuple):
                raise UnsafePickle("REDUCE of something other than a known list builder")
            stack.append(fn.fn(*args))
        elif op == b"\x80":  # PROTO
            if take(1)[0] > 5:
                raise UnsafePickle("pickle protocol above 5")
        elif op == b"\x95":  # FRAME: a length prefix only
            take(8)
        elif op == b".":  # STOP
            if len(stack) != 1 or marks:
                raise UnsafePickle("damaged pickle (stack at STOP)")
            value = stack[0]
            if isinstance(value, _Builder):
                raise UnsafePickle(f"refused global {value.name}")
            return value
        elif op in _REFUSED:
            raise UnsafePickle(f"refused opcode {_REFUSED[op]}")
        else:
            raise UnsafePickle(f"unknown opcode {op!r}")
    raise UnsafePickle("truncated pickle (no STOP)")


def _key(k: object) -> object:
    if isinstance(k, (str, int, float, bool, bytes, type(None))) or (
            isinstance(k, tuple) and all(isinstance(x, (str, int, float, bool)) for x in k)):
        return k
    raise UnsafePickle(f"dict key of type {type(k).__name__}")


def check_depth(value: object, max_depth: int = MAX_DEPTH) -> None:
    """Refuse nesting deeper than ``max_depth``, a container inside itself, and any
    value that is not plain data (a builder left unreduced)."""
    on_path: set[int] = set()
    done: set[int] = set()
    todo: list[tuple[object, int, bool]] = [(value, 1, False)]
    while todo:
        v, depth, leaving = todo.pop()
        if leaving:
            on_path.discard(id(v))
            done.add(id(v))
            continue
        if isinstance(v, (dict, list, tuple)):
            if id(v) in on_path:
                raise UnsafePickle("a container inside itself")
            if id(v) in done:
                continue
            if depth > max_depth:
                raise UnsafePickle(f"nesting over {max_depth} levels")
            on_path.add(id(v))
            todo.append((v, depth, True))
            children = v.values() if isinstance(v, dict) else v
            todo.extend((c, depth + 1, False) for c in children
                        if isinstance(c, (dict, list, tuple, _Builder)))
        elif isinstance(v, _Builder):
            raise UnsafePickle(f"refused global {v.name}")
