"""Shared test fixtures: the repository root and the read-only ../shared folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parent.parent


def _shared_dir() -> Path | None:
    env = os.environ.get("FAULTLINE_SHARED")
    candidate = Path(env) if env else REPO_ROOT.parent / "shared"
    return candidate if (candidate / "INTERFACE.md").is_file() else None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared (or $FAULTLINE_SHARED). In CI its absence is a failure, not a skip."""
    found = _shared_dir()
    if found is None:
        msg = "../shared not found (set FAULTLINE_SHARED)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return found


@pytest.fixture(scope="session")
def ingested_sample(tmp_path_factory) -> Path:
    """The bundled sample ingested once per test session with ``faultline ingest``
    (~10 s). Tests only read it: copy it first to change anything."""
    from typer.testing import CliRunner

    from faultline.cli import app

    db = tmp_path_factory.mktemp("ingested-sample") / "sample.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(REPO_ROOT / "fixtures/sample/corpus"),
                                      "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


# Hypothesis profiles (https://hypothesis.readthedocs.io/en/latest/settings.html#settings-profiles):
# "ci", the default, is derandomized (the same examples on every run, so a red CI is
# reproducible from its log) and sized so the whole property suite stays well under a
# minute; "dev" (HYPOTHESIS_PROFILE=dev) hunts longer, with random seeds and the
# example database.
settings.register_profile(
    "ci", max_examples=25, derandomize=True, deadline=None, database=None,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "dev", max_examples=400, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
