"""The two scripts Gradescope runs, as they go into the zip (build.py).

Gradescope extracts the zip into /autograder/source, runs setup.sh there once (as root, while
it builds the image) and copies run_autograder to /autograder, run once per submission.
AUTOGRADER_ROOT moves /autograder elsewhere, so both run on any machine (tests/e2e).
"""

SKIP_INSTALL = "AUTOGRADER_SKIP_INSTALL"  # like AUTOGRADER_ROOT: a switch of the scripts, not of grading

SETUP_SH = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
# {SKIP_INSTALL}=1: the requirements are installed already (a local test); only prepare.
set -euo pipefail
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
if [ -z "${{{SKIP_INSTALL}:-}}" ]; then
    apt-get install -y --no-install-recommends python3 python3-pip python3-venv bubblewrap
    # Ubuntu 24.04's python3 is "externally managed"; this image is the autograder's alone
    export PIP_BREAK_SYSTEM_PACKAGES=1
    python3 "$HERE/kit/grader/gradescope/same_python.py" "$HERE/gradescope.json" || true
    python3 -m pip install --no-cache-dir -r "$HERE/requirements.txt"
    # installed, not only on PYTHONPATH: the sandboxed kernel runs `python -I`, which ignores it
    python3 -m pip install --no-cache-dir --no-deps "$HERE/kit"
fi
# The release and an empty gradebook, once, instead of on every submission
PYTHONPATH="$HERE/kit" python3 -m grader.gradescope prepare --source "$HERE"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission. It always writes results/results.json.
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
export PYTHONPATH="$ROOT/source/kit${PYTHONPATH:+:$PYTHONPATH}"
exec python3 -m grader.gradescope run --root "$ROOT"
"""
