"""glibc's allocator keeps and reuses freed memory once told to
(``pipeline/malloc.py``): a block freed and asked for again costs no new page faults;
the user's own malloc settings are left alone; and the commands that parse set it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from faultline.pipeline import malloc

# Faults of the second of two rounds, each allocating and filling a 10 MiB block then
# freeing it: glibc's defaults map it afresh each round (2,560 faults of 4 KiB pages);
# with the thresholds fixed, the heap keeps the pages for the second round.
_ROUNDS = textwrap.dedent("""
    import resource, sys
    from faultline.pipeline import malloc
    tuned = malloc.keep_freed_memory() if sys.argv[1] == "tuned" else None
    def fill():
        block = b"x" * (10 << 20)
        return len(block)
    fill()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fill()
    print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")

# mallopt's thresholds are glibc's: elsewhere (macOS, musl) the module does nothing
glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


def _second_round(mode: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], capture_output=True,
                         text=True, check=True, env=env).stdout.split()
    return out[0], int(out[1])


@glibc
def test_a_freed_block_is_reused_without_new_faults():
    tuned, faults = _second_round("tuned")
    assert tuned == "True"
    assert faults < 200  # a few for the interpreter's own bookkeeping
    _none, untuned = _second_round("default")
    assert untuned > 2000  # the block mapped and faulted in again


@glibc
def test_the_users_own_malloc_settings_win():
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072")
    tuned, _faults = _second_round("tuned", env)
    assert tuned == "False"
    assert malloc.user_tuned({"MALLOC_ARENA_MAX": "2"})
    assert malloc.user_tuned({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1"})
    assert not malloc.user_tuned({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"})
    assert not malloc.user_tuned({})


@glibc
def test_the_parsing_commands_set_it_and_the_others_do_not(monkeypatch):
    from faultline import launch

    calls: list[str] = []
    monkeypatch.setattr(malloc, "keep_freed_memory", lambda: calls.append("set") or True)
    monkeypatch.setattr("faultline.cli.main", lambda: None)
    for argv, expected in ((["report"], []), (["--help"], []), (["demo"], ["set"]),
                           (["watch", "c", "--db", "d"], ["set"])):
        calls.clear()
        monkeypatch.setattr(sys, "argv", ["faultline", *argv])
        launch.main()
        assert calls == expected, argv

