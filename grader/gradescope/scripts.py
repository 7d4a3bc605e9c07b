"""The two scripts Gradescope runs, as they go into the zip (build.py).

Gradescope extracts the zip into /autograder/source, runs setup.sh there once (as root, while
it builds the image) and copies run_autograder to /autograder, run once per submission.
AUTOGRADER_ROOT moves /autograder elsewhere, so both run on any machine (tests/e2e).

setup.sh installs into a virtualenv of its own, /autograder/venv: pip then never meets the
image's Debian-installed packages (24.04's python3 is "externally managed"; an apt-installed
package pip must upgrade cannot be uninstalled) nor its old pip. Only a command's exit status
stops it: pip's warnings (an index it cannot reach, running as root) are printed and it goes on.
"""

SKIP_INSTALL = "AUTOGRADER_SKIP_INSTALL"  # like AUTOGRADER_ROOT: a switch of the scripts, not of grading
SKIP_APT = "AUTOGRADER_SKIP_APT"  # python3 and bubblewrap are there already (a test's real install)
VENV = "venv"  # beside source/, under AUTOGRADER_ROOT

SETUP_SH = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
# {SKIP_INSTALL}=1: the requirements are installed already (a local test); only prepare.
# {SKIP_APT}=1: python3 (3.10 or newer, with venv) and bubblewrap are there; install the rest.
set -euo pipefail
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
PY=python3
if [ -z "${{{SKIP_INSTALL}:-}}" ]; then
    if [ -z "${{{SKIP_APT}:-}}" ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends python3 python3-pip python3-venv bubblewrap
    fi
    # exits 1 where the image's Python is too old for the kit; else says what differs
    python3 "$HERE/kit/grader/gradescope/same_python.py" "$HERE/gradescope.json"
    VENV="$(dirname "$HERE")/{VENV}"
    python3 -m venv "$VENV"
    PY="$VENV/bin/python3"
    "$PY" -m pip install --no-cache-dir --upgrade pip
    # torch's CPU build first, alone: its index serves nothing else
    "$PY" -m pip install --no-cache-dir --no-deps -r "$HERE/requirements-torch.txt"
    "$PY" -m pip install --no-cache-dir -r "$HERE/requirements.txt"
    # installed, not only on PYTHONPATH: the sandboxed kernel runs `python -I`, which ignores it
    "$PY" -m pip install --no-cache-dir --no-deps "$HERE/kit"
fi
# The release and an empty gradebook, once, instead of on every submission
PYTHONPATH="$HERE/kit" "$PY" -m grader.gradescope prepare --source "$HERE"
"""

RUN_AUTOGRADER = f"""#!/usr/bin/env bash
# Gradescope runs this for each submission. It always writes results/results.json.
set -u
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PY=python3
if [ -x "$ROOT/{VENV}/bin/python3" ]; then  # setup.sh's virtualenv (none where it skipped the install)
    PY="$ROOT/{VENV}/bin/python3"
    export PATH="$ROOT/{VENV}/bin:$PATH"
fi
export PYTHONPATH="$ROOT/source/kit${{PYTHONPATH:+:$PYTHONPATH}}"
exec "$PY" -m grader.gradescope run --root "$ROOT"
"""
