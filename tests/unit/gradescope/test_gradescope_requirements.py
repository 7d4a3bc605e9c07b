"""The zip's requirements for the Pythons of Gradescope's images (requirements.py), what
setup.sh says of the image's Python (same_python.py), and the order of setup.sh's steps.
Whether PyPI resolves them is tests/unit/gradescope/test_gradescope_dry_run.py's."""

from __future__ import annotations

from packaging.requirements import Requirement

from grader.gradescope import requirements, scripts
from grader.gradescope.requirements import Pin
from grader.gradescope.same_python import check

SETTINGS = {
    "python": "3.11.7",
    "pythons": ["3.10", "3.11", "3.12", "3.13"],
    "not_exact": {"3.10": ["nbgrader", "numpy"], "3.11": [], "3.12": [], "3.13": []},
}


def _chosen(lines: list[str], minor: str) -> list[str]:
    """The lines pip keeps on Python `minor`, markers evaluated as there."""
    env = {"python_version": minor, "python_full_version": f"{minor}.0"}
    reqs = [Requirement(line) for line in lines]
    return [str(r.specifier) for r in reqs if r.marker is None or r.marker.evaluate(env)]


def test_a_pin_every_python_takes_is_exact():
    assert requirements.lines(Pin("torch", "2.13.0", ">=3.10")) == ["torch==2.13.0"]
    assert requirements.lines(Pin("names", "0.3.0", "")) == ["names==0.3.0"]


def test_a_pin_too_new_for_310_is_bounded_there_and_exact_elsewhere():
    got = requirements.lines(Pin("numpy", "2.4.6", ">=3.11"))
    assert _chosen(got, "3.10") == ["<=2.4.6"]
    for minor in ("3.11", "3.12", "3.13"):
        assert _chosen(got, minor) == ["==2.4.6"], minor


def test_a_pin_too_old_for_newer_pythons_is_raised_there():
    got = requirements.lines(Pin("old", "1.0", ">=3.10,<3.12"))
    assert _chosen(got, "3.11") == ["==1.0"]
    assert _chosen(got, "3.12") == [">=1.0"] and _chosen(got, "3.13") == [">=1.0"]


def test_the_build_python_takes_its_own_pins():
    # soupsieve 4.1.3 needs 3.11.5: not 3.11.0, but this venv's 3.11 installed it
    here = Pin("soupsieve", "4.1.3", ">=3.11.5")
    assert here.admits("3.11") and not here.admits("3.10")


def test_not_exact_lists_by_python():
    pins = [Pin("torch", "2.13.0", ">=3.10"), Pin("numpy", "2.4.6", ">=3.11")]
    assert requirements.not_exact(pins) == {"3.10": ["numpy"], "3.11": [], "3.12": [], "3.13": []}


def test_the_torch_file_names_the_cpu_index_alone():
    text = requirements.torch_txt([Pin("numpy", "2.4.6"), Pin("torch", "2.13.0")])
    assert [l for l in text.splitlines() if not l.startswith("#")] == [
        "--index-url https://download.pytorch.org/whl/cpu",
        "torch==2.13.0",
    ]


def test_same_python_refuses_an_older_python_and_notes_what_differs():
    ok, note = check(SETTINGS, "3.8.10")
    assert not ok and "needs Python 3.10 or newer" in note and "Ubuntu 22.04" in note
    ok, note = check(SETTINGS, "3.10.12")
    assert ok and "3.10.12" in note and "nbgrader, numpy" in note
    assert check(SETTINGS, "3.11.2") == (True, None)  # the build's minor
    assert check(SETTINGS, "3.12.3") == (True, None)  # takes every pin
    ok, note = check(SETTINGS, "3.14.0")
    assert ok and note.startswith("WARNING") and "3.10 to 3.13" in note
    assert check({"python": "3.11.7"}, "3.9.0") == (True, None)  # a zip from before: no rule to apply


def test_setup_updates_apt_first_and_installs_torch_before_the_rest():
    s = scripts.SETUP_SH
    steps = ["apt-get update", "apt-get install", "same_python.py", "-m venv", "requirements-torch.txt"]
    steps += ['-r "$HERE/requirements.txt"', '"$HERE/kit"', "grader.gradescope prepare"]
    at = [s.index(step) for step in steps]
    assert at == sorted(at), dict(zip(steps, at))
    assert "|| true" not in s  # same_python's exit 1 stops it; pip's own status decides pip's step
    assert f'"$ROOT/{scripts.VENV}/bin/python3"' in scripts.RUN_AUTOGRADER
