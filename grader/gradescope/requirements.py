"""The zip's requirements: the versions of the virtualenv that builds it, for the Pythons of
Gradescope's images (Ubuntu 22.04: 3.10; 24.04: 3.12), which are rarely the build's.

A package pinned here whose release needs a newer Python than an image's (numpy, nbgrader and
contourpy need 3.11 for the versions of a 3.11 build) would stop pip there. So each pin is
exact on the Pythons its Requires-Python admits, and bounded elsewhere by an environment
marker: `name<=X` on older Pythons (pip takes the newest release that Python supports, at most
the build's), `name>=X` on newer ones. On the build's own Python, `<=X` gives X itself: the
same judge and the same scores as where the zip was built; torch is pinned exactly on all.

torch comes from PyTorch's CPU wheel index (Gradescope has no GPU; PyPI's Linux build carries
CUDA libraries of several GB): requirements-torch.txt, installed first and alone, so that
index serves torch and nothing else. Standard library and `packaging` only (a build step).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from importlib import metadata

KIT_DIST = "backprop-ninja-grader"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH = "torch"
# The minors the zip is written for: the kit's requires-python (>=3.10) to the newest Ubuntu's
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
IMAGES = {"3.10": "Ubuntu 22.04", "3.12": "Ubuntu 24.04"}  # Gradescope's base images


@dataclass(frozen=True)
class Pin:
    name: str
    version: str  # without a local part: "2.13.0+cpu" is pinned as 2.13.0, the index decides the build
    requires_python: str = ""

    def admits(self, minor: str) -> bool:
        """Whether this release installs on Python `minor`: as pip's --python-version sees it
        (X.Y.0), but the build's own minor at its own version (it is installed there)."""
        from packaging.specifiers import SpecifierSet

        here = platform.python_version()
        version = here if here.startswith(f"{minor}.") else minor
        return SpecifierSet(self.requires_python).contains(version, prereleases=True)


def _pin(name: str) -> Pin:
    meta = metadata.metadata(name)
    return Pin(name, meta["Version"].split("+")[0], meta.get("Requires-Python") or "")


def installed_pins(dist: str = KIT_DIST) -> list[Pin]:
    """The kit's dependencies and theirs, with the extras they ask for (jsonschema's
    format-nongpl), each as installed here, sorted by name."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, Pin] = {}
    walked: set[tuple[str, str]] = set()
    todo = [(line, "") for line in metadata.requires(dist) or []]
    while todo:
        line, extra = todo.pop()
        req = Requirement(line)
        if req.marker and not req.marker.evaluate({"extra": extra}):
            continue  # another Python's, or an extra nobody asked for: left to pip there
        key = canonicalize_name(req.name)
        try:
            seen.setdefault(key, _pin(key))
        except metadata.PackageNotFoundError:
            continue  # a dependency pip would leave out here too (another platform's)
        for wanted in {"", *req.extras} - {e for k, e in walked if k == key}:
            walked.add((key, wanted))
            todo += [(more, wanted) for more in metadata.requires(key) or []]
    return sorted(seen.values(), key=lambda p: p.name)


def _between(low: str | None, high: str | None) -> str:
    low_part = [f'python_version >= "{low}"'] if low else []
    return " and ".join(low_part + ([f'python_version <= "{high}"'] if high else []))


def lines(pin: Pin, pythons: tuple[str, ...] = PYTHONS) -> list[str]:
    """requirements.txt's lines for one pin: exact where its Python admits it, bounded elsewhere."""
    exact = f"{pin.name}=={pin.version}"
    admitted = [m for m in pythons if pin.admits(m)]
    if not admitted or admitted == list(pythons):
        return [exact]
    first, last = admitted[0], admitted[-1]
    older = pythons[: pythons.index(first)]
    newer = pythons[pythons.index(last) + 1 :]
    out = [f'{pin.name}<={pin.version}; python_version < "{first}"'] if older else []
    out.append(f"{exact}; {_between(first if older else None, last if newer else None)}")
    if newer:
        out.append(f'{pin.name}>={pin.version}; python_version > "{last}"')
    return out


def not_exact(pins: list[Pin], pythons: tuple[str, ...] = PYTHONS) -> dict[str, list[str]]:
    """For each Python, the packages it cannot take at the build's version (gradescope.json)."""
    return {m: [p.name for p in pins if not p.admits(m)] for m in pythons}


def requirements_txt(pins: list[Pin]) -> str:
    head = [
        f"# Pinned by `backprop-ninja gradescope build` from Python {platform.python_version()}:",
        "# the virtualenv the course grades with locally, so Gradescope's scores are the same.",
        "# A release that needs a newer Python than the image's is bounded there instead (<=).",
        "# torch comes first, from requirements-torch.txt (PyTorch's CPU index).",
    ]
    body = [line for pin in pins for line in lines(pin)]
    return "\n".join(head + body) + "\n"


def torch_txt(pins: list[Pin]) -> str:
    torch = next(p for p in pins if p.name == TORCH)
    return (
        "# Installed first, alone and without dependencies (requirements.txt pins them):\n"
        "# the CPU build, from PyTorch's index; Gradescope has no GPU.\n"
        f"--index-url {CPU_INDEX}\n{TORCH}=={torch.version}\n"
    )
