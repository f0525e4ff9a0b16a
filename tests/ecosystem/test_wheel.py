"""What users install: the wheel and sdist built from this checkout, and the wheel at work in a
fresh virtualenv outside the repository.

The build is ``python -m build`` (sdist first, then the wheel built *from the sdist*, so a file
missing from the sdist fails here too). The virtualenv gets the wheel and its dependencies only;
its commands run in a scratch folder that holds a user's own ``graph.py`` and ``nodes.py``, with
``PYTHONPATH`` unset, so nothing from the checkout can leak in.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"graph": "langgraph_loop", "nodes": "langgraph_loop/nodes"}

pytestmark = pytest.mark.ecosystem


def expected_files() -> set[str]:
    """Every module and marker file under graph/ and nodes/, at its path inside the wheel."""
    found = set()
    for folder, package in FOLDERS.items():
        for path in (REPO / folder).rglob("*"):
            if path.suffix == ".py" or path.name == "py.typed":
                found.add(f"{package}/{path.relative_to(REPO / folder).as_posix()}")
    return found


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def only(folder: Path, pattern: str) -> Path:
    matches = sorted(folder.glob(pattern))
    assert len(matches) == 1, matches
    return matches[0]


def test_wheel_holds_every_module_and_nothing_else_at_top_level(dist: Path) -> None:
    wheel = only(dist, "langgraph_loop-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = expected_files() - names
    assert not missing, f"modules missing from the wheel: {sorted(missing)}"
    stale = {n for n in names if n.endswith(".py")} - expected_files()
    assert not stale, f"modules in the wheel that the checkout no longer has: {sorted(stale)}"
    top = {name.split("/", 1)[0] for name in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == {"langgraph_loop"}
    assert [t for t in dist_info] == [re.sub(r"-py3.*", "", wheel.name).replace(".whl", "")
                                      + ".dist-info"]
    assert "langgraph_loop/py.typed" in names
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info.pop()}/METADATA").decode()
    assert "Name: langgraph-loop" in metadata
    assert "License-File: LICENSE" in metadata
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "langgraph-loop = langgraph_loop.app.cli:main" in zipfile.ZipFile(wheel).read(
        entry_points).decode()


def test_sdist_holds_the_sources(dist: Path) -> None:
    sdist = only(dist, "langgraph_loop-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    sources = {f"{folder}/{p.relative_to(REPO / folder).as_posix()}"
               for folder in FOLDERS for p in (REPO / folder).rglob("*")
               if p.suffix == ".py" or p.name == "py.typed"}
    assert not sources - names, sorted(sources - names)
    assert {"pyproject.toml", "README.md", "LICENSE"} <= names


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the repository with only the wheel (and its dependencies)."""
    root = tmp_path_factory.mktemp("user-venv")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    wheel = only(dist, "langgraph_loop-*.whl")
    proc = subprocess.run([str(root / "venv/bin/python"), "-m", "pip", "install", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "venv"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A user's project folder: their own graph.py and nodes.py next to their script."""
    (tmp_path / "graph.py").write_text("MINE = 'the user graph module'\n")
    (tmp_path / "nodes.py").write_text("MINE = 'the user nodes module'\n")
    return tmp_path


def run_in(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "OPENAI_API_KEY", "OPENAI_BASE_URL", "VIRTUAL_ENV"}}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def readme_block(after: str) -> str:
    """The first ```python block of the README after the line containing ``after``."""
    text = (REPO / "README.md").read_text()
    start = text.index(after)
    match = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert match, f"no python block after {after!r}"
    return match.group(1)


def test_readme_offline_quickstart_runs_from_the_wheel(venv: Path, workdir: Path) -> None:
    script = workdir / "quickstart.py"
    script.write_text(readme_block("Offline, swap the model"))
    proc = run_in(venv, workdir, str(venv / "bin/python"), str(script))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "completed Paris: 18°C, cloudy."


def test_import_beside_a_users_graph_and_nodes_modules(venv: Path, workdir: Path) -> None:
    code = ("import graph, nodes, langgraph_loop, langgraph_loop.nodes\n"
            "from langgraph_loop import create_loop_agent, Limits, LoopDetection, StopReason\n"
            "print(graph.MINE, '|', nodes.MINE, '|', langgraph_loop.__version__, '|',\n"
            "      langgraph_loop.nodes.__name__)\n")
    proc = run_in(venv, workdir, str(venv / "bin/python"), "-c", code)
    assert proc.returncode == 0, proc.stderr
    mine, theirs, version, nodes_pkg = (part.strip() for part in proc.stdout.split("|"))
    assert (mine, theirs, nodes_pkg) == ("the user graph module", "the user nodes module",
                                        "langgraph_loop.nodes")
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", version)


def test_cli_demo_show_and_graph_from_the_wheel(venv: Path, workdir: Path) -> None:
    db = workdir / "demo.sqlite"
    demo = run_in(venv, workdir, "langgraph-loop", "demo", "--offline", "--db", str(db))
    assert demo.returncode == 0, demo.stderr
    assert "10 scenarios ran offline with the scripted demo model." in demo.stdout

    show = run_in(venv, workdir, "langgraph-loop", "show", "demo-react", "--db", str(db))
    assert show.returncode == 0, show.stderr
    assert "thread demo-react" in show.stdout
    assert "stop_reason=completed" in show.stdout

    picture = run_in(venv, workdir, "langgraph-loop", "graph")
    assert picture.returncode == 0, picture.stderr
    assert picture.stdout.lstrip().startswith("---") or "graph TD" in picture.stdout
    for node in ("prepare", "model", "tools", "loop_detector", "router", "judge"):
        assert node in picture.stdout

    module = run_in(venv, workdir, str(venv / "bin/python"), "-m", "langgraph_loop", "--help")
    assert module.returncode == 0, module.stderr
    assert module.stdout.startswith("usage: langgraph-loop")
