"""`backprop-ninja VERB ...` (or `python -m grader VERB ...`): the kit's one command line.

Each verb is the `main(argv)` of one module, imported only when that verb runs;
`backprop-ninja VERB --help` prints that verb's own options.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .grading.nbgrader_main import skip_iri_checker

# verb: (the module whose main(argv) it runs, one line for --help)
VERBS = {
    "grade": ("grader.grading.batch", "grade a course's submissions on every core, or on a Dask cluster"),
    "report": ("grader.reports.report", "the grade table, reports/class.html and the CSV exports"),
    "suspicious": ("grader.reports.suspicious", "the class's signs of cheating, for TAs"),
    "collect": ("grader.incoming.collect", "fill submitted/ from a Canvas or Moodle submissions zip"),
    "gradescope": ("grader.gradescope.__main__", "build the Gradescope autograder zip (and run it there)"),
    "data": ("grader.exercise.data", "obtain makemore's names.txt"),
    "samples": ("grader.incoming.samples", "write the demo's sample class into submitted/"),
    "init": ("grader.new_course.init", "a new course folder with the kit's assignment, anywhere"),
    "new": ("grader.authoring.new", "an exercise written from its forward pass alone, into a course"),
    "check": (
        "grader.self_check.check",
        "with a notebook, its grades here (a student's own check); without, the sandbox",
    ),
}


def _parser() -> argparse.ArgumentParser:
    verbs = "\n".join(f"  {verb:<12}{summary}" for verb, (_, summary) in VERBS.items())
    ap = argparse.ArgumentParser(
        prog="backprop-ninja",
        usage="%(prog)s [-h] VERB ...",
        description=f"The Backprop Ninja grading kit.\n\nverbs:\n{verbs}",
        epilog="`backprop-ninja VERB --help` prints the verb's own options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("verb", metavar="VERB", choices=VERBS, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in VERBS:
        _parser().parse_args(argv[:1])  # exits: 0 after --help, 2 with the usage otherwise
        return 2
    module, _ = VERBS[argv[0]]
    skip_iri_checker()  # 2 s of imports no verb needs (grading/nbgrader_main.py)
    return importlib.import_module(module).main(argv[1:])
