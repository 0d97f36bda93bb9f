"""Refuse ``--beam-opt`` flags that no Beam options class knows.

Beam itself only logs "Discarding unparseable args" and runs on: a typo such as
``direct_num_workrs=2`` would silently give a run with other settings than asked for,
with exit 0. faultline parses the flags with the same parser Beam builds (every
registered :class:`PipelineOptions` subclass adds its arguments) and turns what is left
over into a usage error with the closest known names.
"""

from __future__ import annotations

import difflib


def _subclasses(cls: type) -> list[type]:
    """Every options class registered so far, as Beam's own parser collects them
    (runner modules imported earlier, such as the Dask runner's, included)."""
    out: list[type] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def known_flags() -> dict[str, None]:
    """Every ``--flag`` some options class defines (ordered, no duplicates)."""
    import argparse

    from apache_beam.options.pipeline_options import PipelineOptions  # only when flags given

    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False,
                                     conflict_handler="resolve")
    seen: set[str] = set()
    for cls in _subclasses(PipelineOptions):
        if cls.__qualname__ in seen:
            continue
        seen.add(cls.__qualname__)
        try:
            cls._add_argparse_args(parser)  # Beam's own hook for this
        except argparse.ArgumentError:
            continue
    return {opt: None for action in parser._actions
            for opt in action.option_strings if opt.startswith("--")}


def unknown(flags: list[str]) -> list[str]:
    """The flags (``--name`` or ``--name=value``) no options class defines."""
    known = known_flags()
    return [f for f in flags if f.startswith("--") and f.split("=", 1)[0] not in known]


def check(flags: list[str]) -> None:
    """Raise ``ValueError`` naming each unknown flag and its closest known names
    (no flags: nothing to check, and Beam is not imported for it)."""
    if not flags:
        return
    bad = unknown(flags)
    if not bad:
        return
    names = list(known_flags())
    parts = []
    for flag in bad:
        name = flag.split("=", 1)[0]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.7)
        hint = f" (did you mean {', '.join(c[2:] for c in close)}?)" if close else ""
        parts.append(f"{name[2:]}{hint}")
    raise ValueError("--beam-opt: no Beam pipeline option is called " + "; ".join(parts))
