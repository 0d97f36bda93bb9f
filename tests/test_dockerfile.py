"""Replay the Dockerfile without Docker: no registry is reachable here, so the image
cannot be built, but its steps can run in a scratch virtual environment. This proves
its COPY list is complete, its pip line installs a working package (non-editable, so
package data really ships) and its CMD behaves like the README's demo command.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT
from test_docs import _dockerfile

ALLOWED_NON_PIP = {"useradd"}  # image housekeeping that must not run on a test host


def _copy(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


@pytest.mark.slow
def test_dockerfile_steps_install_and_run_the_demo(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    root = tmp_path / "image"
    workdir = root
    cmd: list[str] | None = None
    for instr, arg in _dockerfile():
        if instr == "ENV":
            parts = shlex.split(arg)
            env.update(p.split("=", 1) for p in parts)
        elif instr == "WORKDIR":
            workdir = root / arg.lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        elif instr == "COPY":
            # Docker's rules: a directory's contents go to dest; files go into dest
            # when it ends with "/" (or several sources are given), else become dest.
            *srcs, dest = arg.split()
            dest_path = workdir / dest
            for s in srcs:
                src = REPO_ROOT / s
                into = src.is_file() and (dest.endswith("/") or len(srcs) > 1)
                _copy(src, dest_path / src.name if into else dest_path)
        elif instr == "RUN":
            for step in arg.split("&&"):
                argv = shlex.split(step)
                if argv[0] in ALLOWED_NON_PIP:
                    continue
                assert argv[0] == "pip", f"unexpected RUN step {step!r}"
                subprocess.run([str(venv / "bin" / "pip"), *argv[1:]], cwd=workdir,
                               env=env, check=True, capture_output=True)
        elif instr == "CMD":
            cmd = json.loads(arg)
    assert cmd is not None
    image = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                           timeout=300)
    # The same entry point through the developer install, from the same kind of place.
    dev_bin = Path(sys.executable).parent
    dev = subprocess.run([str(dev_bin / cmd[0]), *cmd[1:]], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "COLUMNS": "100"})
    assert (image.returncode, image.stdout.splitlines()[:1]) == (
        dev.returncode, dev.stdout.splitlines()[:1])
    # the installed package is a real copy, not the checkout
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import faultline.schemas.taxonomy as t; print(t.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert str(venv) in where.stdout
