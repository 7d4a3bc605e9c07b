"""`nbgrader`, as the kit starts it (nbgrader_cli.py): nbgrader's own command line, in a process
that does not import jsonschema's optional IRI checker.

jupyter-events asks for jsonschema's `format-nongpl` extra, which installs rfc3987-syntax; when
it is there, jsonschema imports it, and it builds 38 parsers at import: about 2 s of CPU in every
process that imports nbformat, which is every nbgrader command and every grading worker. No
notebook, configuration or event these processes validate has an `iri` format; without the
module, jsonschema leaves that one format unchecked and checks everything else as before.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def skip_iri_checker() -> None:
    """Before anything imports jsonschema: `import rfc3987_syntax` then raises ImportError,
    which jsonschema expects of an optional checker."""
    sys.modules.setdefault("rfc3987_syntax", None)


@contextmanager
def start_up_uncollected() -> Iterator[None]:
    """No cyclic garbage collection while a grading process imports (nbgrader, torch, the kit's
    judge: about a million objects and almost no garbage, each full collection walking them all),
    then what was imported frozen out of every later collection: a notebook's garbage is collected
    without walking torch again (0.65 of one worker's 6.6 CPU-s, 12 submissions, went to the
    collector). The collector is left as it was found."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def main() -> int:
    skip_iri_checker()
    with start_up_uncollected():
        from nbgrader.apps.nbgraderapp import main as nbgrader_main

    return nbgrader_main()


if __name__ == "__main__":
    sys.exit(main())
