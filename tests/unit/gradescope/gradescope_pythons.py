"""Helpers of the Gradescope install checks (test_gradescope_dry_run.py, tests/e2e/test_gradescope.py):
a real interpreter of a given minor where this machine has one, pip on PyPI alone, and a
stand-in for torch's CPU build (its index cannot be reached from here)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import zipfile
from importlib import metadata
from pathlib import Path

PYPI = "https://pypi.org/simple"


def find_python(minor: str) -> str | None:
    """A working CPython `minor` that is no virtualenv's (one of pyenv's, or on PATH), by its
    real path: a virtualenv made from it links to that path, which a sandbox can bind."""
    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{minor}.*/bin/python{minor}")))
    found.append(shutil.which(f"python{minor}"))
    probe = "import os, sys; print('%d.%d' % sys.version_info[:2], sys.prefix == sys.base_prefix)"
    for python in filter(None, found):
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.split() == [minor, "True"]:
            return os.path.realpath(python)
    return None


def pypi_env() -> dict[str, str]:
    """pip on PyPI alone: the machine's own pip configuration (local wheels, mirrors) left out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    return dict(env, PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=PYPI, PIP_DISABLE_PIP_VERSION_CHECK="1")


def stand_in_torch(folder: Path) -> str:
    """A wheel of no code with the installed torch's metadata (the CPU build's requirements)."""
    meta = metadata.metadata("torch")
    assert "+cpu" in meta["Version"], "the stand-in needs the CPU build's metadata"
    keep = ("Metadata-Version", "Name", "Version", "Requires-Python", "Requires-Dist", "Provides-Extra")
    info = f"torch-{meta['Version']}.dist-info"
    with zipfile.ZipFile(folder / f"torch-{meta['Version']}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{info}/METADATA", "".join(f"{k}: {v}\n" for k, v in meta.items() if k in keep))
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return meta["Version"]
