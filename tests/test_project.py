"""The project's set-up files agree with each other: the conda environment mirrors
pyproject's dependencies, CI runs the README's test command, and the README shows the two
commands a learner needs."""

import os
import re

import pytest

try:
    import tomllib                     # Python 3.11+
except ImportError:                    # Python 3.10: the pyproject checks below are skipped
    tomllib = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def requirement(text):
    """'pandas>=2' -> ('pandas', '>=2'); names compared the way pip compares them."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-\[\]]+)\s*(.*?)\s*", text)
    name, spec = match.groups()
    return re.sub(r"[-_.]+", "-", name).lower(), spec.replace(" ", "")


def environment_yml():
    """(conda dependencies, pip dependencies) of the simple environment.yml we keep."""
    conda, pip, section = [], [], None
    for line in read("environment.yml").splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped:
            continue
        if not line.startswith(" "):
            section = stripped.rstrip(":")
            continue
        if section != "dependencies":
            continue
        item = stripped.strip()
        if item == "- pip:":
            continue                                      # its items are indented deeper
        if item.startswith("- "):
            indent = len(line) - len(line.lstrip())
            (pip if indent > 4 else conda).append(item[2:].strip())
    return conda, pip


def pyproject():
    if tomllib is None:
        pytest.skip("reading pyproject.toml needs tomllib (Python 3.11+)")
    return tomllib.loads(read("pyproject.toml"))


def expand(extras, names, own_name):
    """The requirements of these extras, following `own-name[extra]` references."""
    out, todo, seen = set(), list(names), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for r in extras[name]:
            package, _ = requirement(r)
            if package.startswith(own_name):
                todo += re.findall(r"\[([^\]]+)\]", r)[0].split(",")
            else:
                out.add(requirement(r))
    return out


def test_environment_yml_mirrors_pyprojects_dependencies():
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    own_name = requirement(project["name"])[0]
    wanted = {requirement(r) for r in project["dependencies"]} | expand(extras, ["test"], own_name)
    conda, pip = environment_yml()
    have = {requirement(r) for r in conda + [p for p in pip if p != "-e ."]} \
        - {("python", requirement(conda[0])[1]), ("pip", "")}
    assert have == wanted
    assert requirement(conda[0]) == ("python", project["requires-python"])
    assert "-e ." in pip                                  # the package itself, editable


def test_ci_runs_the_readmes_test_command():
    ci = read(".ci", "run")
    assert re.search(r"^make test$", ci, re.M)
    assert os.access(os.path.join(ROOT, ".ci", "run"), os.X_OK)


def test_the_readme_shows_the_two_commands_and_the_makefile_has_them():
    readme = read("README.md")
    assert re.search(r"^make lab\b", readme, re.M) and re.search(r"^make test\b", readme, re.M)
    makefile = read("Makefile")
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "pip install" in makefile and "[test]" in makefile


def test_the_core_package_has_no_dependencies():
    assert pyproject()["project"]["dependencies"] == []


def test_make_lab_opens_jupyterlab_on_the_course(tmp_path):
    """`make lab` is one of the README's two commands: its JupyterLab must really start."""
    import socket
    import subprocess
    import time
    import urllib.request

    command = subprocess.run(["make", "-s", "-n", "--no-print-directory", "lab"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip().splitlines()[-1].split()
    assert command[0].endswith("jupyter") and command[1] == "lab"
    assert "notebooks/00_welcome.ipynb" in command
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_DATA_DIR=str(tmp_path / "data"))
    server = subprocess.Popen(
        [os.path.join(ROOT, command[0]) if not os.path.isabs(command[0]) else command[0],
         *command[1:], "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         "--IdentityProvider.token=course", "--ServerApp.port_retries=0"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                url = f"http://127.0.0.1:{port}/api/contents/notebooks/00_welcome.ipynb?content=0&token=course"
                with urllib.request.urlopen(url, timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert server.poll() is None, server.stderr.read()[-2000:]
                assert time.monotonic() < deadline, "JupyterLab did not answer within 60 s"
                time.sleep(0.3)
    finally:
        server.terminate()
        server.wait(timeout=20)
