"""Issue 20: the zip's requirements resolve on PyPI for the Pythons of Gradescope's images,
Ubuntu 22.04 (CPython 3.10, glibc 2.35) and 24.04 (3.12, glibc 2.39), x86_64: `pip install
--dry-run --python-version` with wheels only, for the image's manylinux tags. Needs PyPI:
skipped, saying so, where it cannot be reached.

What pip cannot do here, and what stands in:
- with --python-version, pip evaluates environment markers for the Python it runs on, not the
  target's: each line's marker is evaluated for the target first (as the image's pip would);
- names 0.3.0 is a source distribution only, which --python-version refuses: left out there,
  and resolved (built) by a real 3.10 and 3.12 where this machine has them (pyenv's), whose
  own pip also evaluates the packages' markers (anyio's exceptiongroup on 3.10);
- torch comes from PyTorch's CPU index, which this machine cannot reach, and PyPI's Linux torch
  is the CUDA build (526 MB, without metadata on its own, and GBs of CUDA wheels): a stand-in
  wheel with the installed CPU build's metadata takes its place, so torch's dependencies are
  resolved with the pins; that PyPI has torch at the pinned version for the target is checked
  with `pip index versions`. Whether the CPU index has it for cp310 and cp312 is not checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from unit.gradescope.gradescope_pythons import PYPI, find_python, pypi_env, stand_in_torch

from grader.gradescope import build, requirements

from conftest import ROOT

pytestmark = pytest.mark.integration  # pip, over the network
IMAGES = {"3.10": 35, "3.12": 39}  # Gradescope's image's Python -> its glibc's minor
SOURCE_ONLY = {"names"}


@pytest.fixture(scope="module")
def pypi():
    try:
        urllib.request.urlopen(f"{PYPI}/pip/", timeout=15).close()
    except OSError as e:
        pytest.skip(f"PyPI cannot be reached from here ({e}): the dry runs need it")


@pytest.fixture(scope="module")
def shipped():
    """requirements.txt and requirements-torch.txt as the zip carries them."""
    entries = {e.name: e for e in build.plan(course=ROOT).entries}
    return {name: entries[name].content().decode() for name in ("requirements.txt", "requirements-torch.txt")}


def for_python(text: str, minor: str) -> dict[str, Requirement]:
    """The requirements pip keeps on Python `minor`, markers evaluated as there."""
    env = {"python_version": minor, "python_full_version": f"{minor}.0"}
    kept = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith(("#", "--")):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(env):
                req.marker = None
                kept[req.name] = req
    return kept


def pip(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess:
    cmd = [python, "-m", "pip", *args]
    return subprocess.run(cmd, env=pypi_env(), capture_output=True, text=True, timeout=900)


def _target(minor: str) -> list[str]:
    glibc = [f"manylinux_2_{n}_x86_64" for n in range(17, IMAGES[minor] + 1)]
    platforms = [arg for p in ["manylinux2014_x86_64", *glibc] for arg in ("--platform", p)]
    return ["--python-version", minor, "--only-binary=:all:", *platforms]


@pytest.mark.parametrize("minor", sorted(IMAGES))
def test_requirements_resolve_for_the_image(pypi, shipped, tmp_path, minor):
    wanted = for_python(shipped["requirements.txt"], minor)
    torch_version = stand_in_torch(tmp_path)
    (tmp_path / "req.txt").write_text("".join(f"{r}\n" for n, r in wanted.items() if n not in SOURCE_ONLY))
    done = pip(
        *("install", "--dry-run", "--ignore-installed", "--quiet", *_target(minor)),
        *("--find-links", str(tmp_path), "--report", str(tmp_path / "report.json")),
        *("-r", str(tmp_path / "req.txt")),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
        for i in json.loads((tmp_path / "report.json").read_text())["install"]
    }
    assert got["torch"] == torch_version  # the stand-in: torch's dependencies resolved with the pins
    for name, req in wanted.items():
        if name in SOURCE_ONLY:
            continue
        version = Version(got[canonicalize_name(name)])  # "==" pins stay exact, "<=" ones bounded
        assert req.specifier.contains(version, prereleases=True), (name, str(req.specifier), version)
    print(f"Python {minor}: {len(got)} packages; nbgrader {got['nbgrader']}, numpy {got['numpy']}")


@pytest.mark.parametrize("minor", sorted(IMAGES))
def test_pypi_has_the_pinned_torch_for_the_image(pypi, shipped, minor):
    torch = for_python(shipped["requirements-torch.txt"], minor)["torch"]
    done = pip("index", "versions", "torch", *_target(minor))
    assert done.returncode == 0, done.stdout + done.stderr
    available = done.stdout.split("Available versions:", 1)[1].splitlines()[0]
    assert str(torch.specifier)[2:] in [v.strip() for v in available.split(",")], available


@pytest.mark.parametrize("minor", sorted(IMAGES))
def test_a_real_python_of_the_image_resolves_them(pypi, shipped, tmp_path, minor):
    """Where this machine has that Python: its own pip evaluates the markers (the packages'
    too: anyio's exceptiongroup on 3.10) and builds names from source, as the image's would."""
    python = find_python(minor)
    if python is None:
        pytest.skip(f"no Python {minor} here (PATH, pyenv): the --python-version dry run stands in")
    (tmp_path / "requirements.txt").write_text(shipped["requirements.txt"])
    stand_in_torch(tmp_path)
    done = pip(
        *(
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--only-binary=:all:",
            "--no-binary=names",
        ),
        *("--find-links", str(tmp_path), "--report", str(tmp_path / "report.json")),
        *("-r", str(tmp_path / "requirements.txt")),
        python=python,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
        for i in json.loads((tmp_path / "report.json").read_text())["install"]
    }
    assert set(for_python(shipped["requirements.txt"], minor)) <= set(got) and got["names"] == "0.3.0"


def test_the_image_pythons_are_the_ones_the_requirements_name():
    assert set(IMAGES) == set(requirements.IMAGES) and set(IMAGES) <= set(requirements.PYTHONS)
