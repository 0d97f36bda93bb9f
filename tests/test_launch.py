"""The console script's early fork server (``faultline/launch.py``): the argument list
is read as ``ingest`` reads it or not at all, the server starts before the CLI's
imports only for a run that wants one, the command takes it, and one it does not take
(a usage error) is stopped at exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import typer

from faultline import cli, launch
from faultline.pipeline import forkserver


def _ingest_command():
    return typer.main.get_command(cli.app).commands["ingest"]


def test_the_options_read_are_the_commands():
    params = [p for p in _ingest_command().params if isinstance(p, typer.core.TyperOption)]
    assert {o for p in params for o in p.opts + p.secondary_opts} == launch.INGEST_OPTIONS
    assert not any(p.is_flag for p in params)  # each takes a value, as the reading assumes
    runner = next(p for p in params if p.name == "runner")
    assert runner.default == launch.DEFAULT_RUNNER


@pytest.mark.parametrize(("argv", "expected"), [
    (["ingest", "c"], (["c"], "DirectRunner", None, [])),
    (["ingest", "a", "--db", "x.duckdb", "b", "--workers", "4"], (["a", "b"], "DirectRunner",
                                                                  4, [])),
    (["ingest", "--workers=2", "--runner", "dask", "c"], (["c"], "dask", 2, [])),
    (["ingest", "c", "--beam-opt", "--direct_num_workers=2", "--beam-opt=x"],
     (["c"], "DirectRunner", None, ["--direct_num_workers=2", "x"])),
    (["ingest", "--db", "d", "--", "--odd-name", "c"], (["--odd-name", "c"], "DirectRunner",
                                                        None, [])),
    (["ingest", "-"], (["-"], "DirectRunner", None, [])),
    (["ingest", "c", "--help"], None),  # not a run
    (["ingest", "c", "-h"], None),  # a short option: not read
    (["ingest", "c", "--worker", "2"], None),  # a typo: the command says so
    (["ingest", "c", "--workers", "two"], None),
    (["ingest", "c", "--db"], None),  # a value missing
    (["report", "--db", "x"], None),
    ([], None),
])
def test_the_argument_list_is_read_as_ingest_reads_it_or_not_at_all(argv, expected):
    assert launch.ingest_args(argv) == expected


# the console script, with the fork server's start recorded: which modules were loaded
# by then, and whether the server had stopped by the end
_RUN = textwrap.dedent("""
    import atexit, sys
    from faultline.pipeline import forkserver
    started = []
    real = forkserver.ForkServer.start.__func__
    def start(cls, *args, **kwargs):
        server = real(cls, *args, **kwargs)
        started.append((server, "faultline.cli" in sys.modules))
        return server
    forkserver.ForkServer.start = classmethod(start)
    def report():  # registered first: runs after launch's own handler
        print("STARTS", *(f"{cli}:{s.process.poll() is not None}" for s, cli in started),
              file=sys.stderr)
    atexit.register(report)
    from faultline.launch import main
    sys.argv = ["faultline", *sys.argv[1:]]
    main()
""")


def _starts(*args: str) -> tuple[int, list[str]]:
    done = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True,
                          text=True, timeout=600, check=False)
    last = done.stderr.strip().splitlines()[-1].split()
    assert last[0] == "STARTS", done.stderr
    return done.returncode, last[1:]


@pytest.mark.skipif(not forkserver.supported(), reason="Linux fork server")
def test_a_multi_worker_ingest_starts_its_server_before_the_cli(repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    code, starts = _starts("ingest", str(corpus), "--db", str(tmp_path / "x.duckdb"),
                           "--workers", "2")
    assert code == 0
    assert starts == ["False:True"]  # one server, started before the CLI was imported


@pytest.mark.skipif(not forkserver.supported(), reason="Linux fork server")
def test_a_server_the_command_does_not_take_is_stopped(repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    code, starts = _starts("ingest", str(corpus), "--db", str(tmp_path / "x.duckdb"),
                           "--workers", "2", "--year", "last")  # a usage error
    assert code == 2
    assert starts == ["False:True"]


def test_one_worker_starts_no_server(repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    code, starts = _starts("ingest", str(corpus), "--db", str(tmp_path / "x.duckdb"),
                           "--workers", "1")
    assert code == 0
    assert starts == []


_COUNT = textwrap.dedent("""
    import atexit, sys
    from faultline.pipeline import forkserver
    walks = []
    real = forkserver.likely
    forkserver.likely = lambda workers, roots: walks.append(list(roots)) or real(workers, roots)
    atexit.register(lambda: print("WALKS", sum(map(bool, walks)), file=sys.stderr))
    from faultline.launch import main
    sys.argv = ["faultline", *sys.argv[1:]]
    main()
""")


def test_the_command_takes_the_decision_made_here(repo_root, tmp_path):
    """The corpus is walked once to decide on a server (0.05 s on small x4): the
    command reuses the decision the console script made for the same options."""
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    done = subprocess.run([sys.executable, "-c", _COUNT, "ingest", str(corpus), "--db",
                           str(tmp_path / "x.duckdb")], capture_output=True, text=True,
                          timeout=600, check=True)
    assert done.stderr.strip().splitlines()[-1] == "WALKS 1"
    assert launch.decided([str(corpus)], "DirectRunner", None, []) is None  # not here
