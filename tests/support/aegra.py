"""Aegra (a self-hosted LangGraph Agent Server, PyPI ``aegra-api``/``aegra-cli``) for tests.

:func:`server_venv` builds a Python 3.12 virtualenv with Aegra and this project installed
from the checkout (a regular, non-editable install, like a deployment image). It is cached
under ``build/aegra-venv-<hash>`` (hash of ``pyproject.toml``, the Aegra pins and the
Python version): a fresh clone (CI) builds it, later local runs reuse it and only reinstall
the project when its sources changed. :func:`write_config` writes an Aegra config with
``langgraph.json``'s graphs (paths made absolute, nothing hard-coded) plus extra graphs.
:class:`AegraProcess` is one ``aegra serve`` in its own process group.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tests.support.postgres import free_port

# Each process holds at most 4 + 8 (SQLAlchemy) + 10 (checkpointer) PostgreSQL connections, so
# two fit in a default server's 100 next to whatever else uses it.
POOLS = {"SQLALCHEMY_POOL_SIZE": "4", "SQLALCHEMY_MAX_OVERFLOW": "8",
         "LANGGRAPH_MIN_POOL_SIZE": "1", "LANGGRAPH_MAX_POOL_SIZE": "10"}
AEGRA_PINS = ("aegra-api>=0.11,<0.12", "aegra-cli>=0.11,<0.12")
PY312_ENV = "LANGGRAPH_LOOP_TEST_PY312"
START_TIMEOUT_S = 180.0


class AegraSetupError(RuntimeError):
    """Raised when the server virtualenv cannot be built or a server does not start."""


def _run(cmd: list[str], *, what: str, timeout: float = 900, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
                          check=False)
    if proc.returncode != 0:
        raise AegraSetupError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                              f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout


def find_python312() -> str:
    """A working ``python3.12``: ``$LANGGRAPH_LOOP_TEST_PY312``, PATH, then pyenv's versions."""
    candidates = [os.environ.get(PY312_ENV), shutil.which("python3.12"),
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))),
                  "/usr/bin/python3.12", "/usr/local/bin/python3.12"]
    for candidate in filter(None, candidates):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30, check=False)
            if out.returncode == 0 and out.stdout.strip() == "(3, 12)":
                return candidate
    raise AegraSetupError(f"Aegra needs Python 3.12: none found (set {PY312_ENV})")


def _digest(paths: list[Path], extra: str = "") -> str:
    sha = hashlib.sha256(extra.encode())
    for path in paths:
        sha.update(str(path).encode())
        sha.update(path.read_bytes())
    return sha.hexdigest()[:12]


def _sources(repo: Path) -> list[Path]:
    """The files that make up the installed project."""
    files = [p for top in ("graph", "nodes") for p in (repo / top).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    return sorted([repo / "pyproject.toml", repo / "README.md", repo / "LICENSE", *files])


def server_venv(repo: Path) -> Path:
    """The cached Aegra virtualenv with this checkout installed (see the module docstring)."""
    python = find_python312()
    base = _digest([repo / "pyproject.toml"], extra=" ".join(AEGRA_PINS) + python)
    venv = repo / "build" / f"aegra-venv-{base}"
    for stale in (repo / "build").glob("aegra-venv-*"):
        if stale != venv:
            shutil.rmtree(stale, ignore_errors=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
           "--disable-pip-version-check"]
    stamp = venv / f".project-{_digest(_sources(repo))}"
    with tempfile.TemporaryDirectory(prefix="aegra-project-") as tmp:
        project = _copy_project(repo, Path(tmp))
        if not (venv / ".aegra-installed").exists():
            shutil.rmtree(venv, ignore_errors=True)
            _run([python, "-m", "venv", str(venv)], what="python3.12 -m venv")
            _run([*pip, *AEGRA_PINS, str(project)], what="pip install aegra and the project")
            (venv / ".aegra-installed").touch()
            stamp.touch()
        if not stamp.exists():
            for old in venv.glob(".project-*"):
                old.unlink()
            _run([*pip, "--force-reinstall", "--no-deps", str(project)],
                 what="pip install the project")
            stamp.touch()
    return venv


def _copy_project(repo: Path, to: Path) -> Path:
    """The packaged files of the checkout, copied so that pip's in-tree build leaves no
    ``build/lib`` behind in the checkout (and picks up no stale one)."""
    target = to / "project"
    target.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(repo / name, target / name)
    for top in ("graph", "nodes"):
        shutil.copytree(repo / top, target / top, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def write_config(repo: Path, path: Path, extra_graphs: dict[str, str]) -> Path:
    """An Aegra config at ``path``: ``langgraph.json`` with absolute paths, plus ``extra_graphs``."""
    config = json.loads((repo / "langgraph.json").read_text())

    def absolute(spec: str) -> str:
        file, _, attr = spec.partition(":")
        return f"{(repo / file).resolve()}:{attr}" if attr else str((repo / spec).resolve())

    config["dependencies"] = [absolute(d) for d in config.get("dependencies", [])]
    config["graphs"] = {**{k: absolute(v) for k, v in config["graphs"].items()}, **extra_graphs}
    if "app" in config.get("http", {}):
        config["http"]["app"] = absolute(config["http"]["app"])
    config.pop("$schema", None)
    path.write_text(json.dumps(config, indent=2))
    return path


def migrate(venv: Path, env: dict[str, str], cwd: Path) -> None:
    """``aegra db upgrade``: create the schema once, before the servers start."""
    _run([str(venv / "bin" / "aegra"), "db", "upgrade"], what="aegra db upgrade", env=env, cwd=cwd)


class AegraProcess:
    """One ``aegra serve`` in its own process group, logging to ``log``."""

    def __init__(self, venv: Path, config: Path, port: int, env: dict[str, str], log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        cmd = [str(venv / "bin" / "aegra"), "serve", "-c", str(config), "--host", "127.0.0.1",
               "--port", str(port)]
        if shutil.which("timeout"):
            cmd = ["timeout", "1200", *cmd]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=config.parent, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Poll ``/ready`` until it answers 200; fail with the log tail if the server died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            with (contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
                  urllib.request.urlopen(self.url + "/ready", timeout=2) as resp):
                if resp.status == 200:
                    return
            time.sleep(0.25)
        raise AegraSetupError(f"{self.url} not ready (exit {self.proc.poll()}):\n"
                              f"{self.log.read_text(errors='replace')[-4000:]}")

    def kill(self) -> None:
        """SIGKILL this server's process group (``aegra serve`` and its uvicorn): a crash."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """Stop the process group (SIGTERM, then SIGKILL)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        with contextlib.suppress(ProcessLookupError):  # a uvicorn child left behind
            os.killpg(self.proc.pid, signal.SIGKILL)


def server_env(database: str, redis: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a server process: this one minus the test venv, plus the deployment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **POOLS, "DATABASE_URL": database, "REDIS_BROKER_ENABLED": "true",
            "REDIS_URL": redis, "RUN_MIGRATIONS_ON_STARTUP": "false",
            "LANGSMITH_TRACING": "false", **extra}


@contextlib.contextmanager
def serving(venv: Path, config: Path, envs: Sequence[Mapping[str, str]],
            logdir: Path) -> Iterator[list[AegraProcess]]:
    """``aegra db upgrade``, then one server per env, each started once the previous is ready
    (servers started together on a fresh database race creating the checkpointer's tables).
    All are stopped on exit, also when one failed to start."""
    migrate(venv, dict(envs[0]), logdir)
    servers: list[AegraProcess] = []
    try:
        for i, env in enumerate(envs):
            servers.append(AegraProcess(venv, config, free_port(), dict(env), logdir / f"aegra-{i}.log"))
            servers[-1].wait_ready()
        yield servers
    finally:
        for server in servers:
            server.stop()
