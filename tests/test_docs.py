"""The docs, CI script, Dockerfile and packaging agree with the code."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from conftest import REPO_ROOT

from faultline.schemas import ddl


def readme() -> str:
    return (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def readme_commands() -> list[str]:
    """The shell blocks of the README's first screen: [demo, tests]."""
    blocks = re.findall(r"```sh\n(.+?)\n```", readme(), flags=re.S)
    return blocks[:2]


def test_readme_schema_section_is_generated_from_schemas():
    assert ddl.readme_with_schema(readme()) == readme(), (
        "README schema section is stale: run python -m faultline.schemas.ddl README.md"
    )


def test_readme_first_screen_has_demo_and_test_commands():
    demo, tests = readme_commands()
    first_screen = readme().split("\n## ")[0]
    assert demo in first_screen and tests in first_screen
    assert demo.startswith("python3 -m venv .venv") and demo.endswith("faultline demo")
    assert tests.startswith("python3 -m venv .venv") and tests.endswith("pytest")
    for cmd in (demo, tests):
        assert "-c constraints.txt" in cmd


def test_ci_runs_the_readme_test_command_and_linters():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()
    assert "ruff check" in ci
    assert "hadolint Dockerfile" in ci


def test_readme_links_exist():
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)\)", readme()):
        assert (REPO_ROOT / target).exists(), target


def _pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def test_every_python_package_directory_is_installed():
    """A package directory missing from pyproject's list would vanish from the wheel."""
    st = _pyproject()["tool"]["setuptools"]
    listed = set(st["packages"])
    found = set()
    for top, target in st["package-dir"].items():
        root = REPO_ROOT / target
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
                continue
            found.add(".".join([top, *rel.parts]) if rel.parts else top)
    assert found == listed


def _dockerfile() -> list[tuple[str, str]]:
    text = (REPO_ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instr, _, rest = line.partition(" ")
            out.append((instr.upper(), rest.strip()))
    return out


def test_dockerfile_installs_the_package_from_the_lock_and_runs_the_demo():
    steps = _dockerfile()
    runs = " ".join(arg for instr, arg in steps if instr == "RUN")
    assert re.search(r"pip install .*-c constraints\.txt \.(\s|$)", runs)
    cmd = [arg for instr, arg in steps if instr == "CMD"]
    assert cmd == ['["faultline", "demo"]']
    assert readme_commands()[0].endswith("faultline demo")
    # everything the install needs is copied in
    copied = " ".join(arg for instr, arg in steps if instr == "COPY").split()
    dirs = set(_pyproject()["tool"]["setuptools"]["package-dir"].values())
    for needed in dirs | {"constraints.txt", "pyproject.toml", "README.md"}:
        assert needed in copied, needed


def test_docs_pages_exist():
    assert (REPO_ROOT / "docs" / "corpus.md").is_file()
    assert Path(REPO_ROOT / "constraints.txt").read_text().count("==") > 20
