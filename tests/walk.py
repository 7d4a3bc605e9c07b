"""The judge's walk: which of the kit's files one submission's grading goes through, from
`ReplayGrades.preprocess` to the record, traced as it runs (the grading process only: the
replay's runs are processes of their own).

A *call* is one function of one of the kit's files calling a function of another (through any
library in between), counted once however often it runs; a *climb* is such a call into a file
that is still running further down the stack (A calls B, which calls back into A): the walk
climbs back to where it already was instead of going on. A *stay* is a stretch of the walk, as
a reader follows it (each call read once, where it first happens), inside one folder of the
pipeline (the leaves every job reads, LEAVES, are not stays): a folder entered once is one stay.
Printed: the files entered, the calls, the climbs (listed), the stays in order, and each file's
functions entered from elsewhere.

    .venv/bin/python tests/walk.py NOTEBOOK COURSE [--student S] [--kit CHECKOUT]

NOTEBOOK is a submission (e.g. the demo class's bob); COURSE a course folder with
source/backprop_ninja/names.txt. --kit imports another checkout's `grader` (say a worktree of
an older commit) to compare its walk with this one's.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

# what every job reads: the exercise's definition, the settings, the shared protocol, quoting
LEAVES = ("exercise/", "settings.py", "quote.py", "untrusted/protocol.py")


def trace(kit: Path, run) -> list[tuple[str, str, bool]]:
    """Every call between two of the kit's files while run() runs, in order, as
    (caller "file:function", callee "file:function", whether it is a climb)."""
    root = str(kit / "grader") + "/"
    calls: list[tuple[str, str, bool]] = []
    stack: list[str] = []  # the kit's files of the running kit frames, innermost last

    def where(frame) -> str:
        return f"{frame.f_code.co_filename[len(root) :]}:{frame.f_code.co_name}"

    def profile(frame, event, _arg):
        if not frame.f_code.co_filename.startswith(root) or event not in ("call", "return"):
            return
        if event == "return":
            if stack:  # a kit frame that was running before the trace began
                stack.pop()
            return
        callee, caller = where(frame), frame.f_back
        while caller is not None and not caller.f_code.co_filename.startswith(root):
            caller = caller.f_back
        file = callee.split(":")[0]
        if caller is not None and stack and stack[-1] != file:
            calls.append((where(caller), callee, file in stack))
        stack.append(file)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def stays(calls: list[tuple[str, str, bool]]) -> list[str]:
    """The pipeline's folders in the order the walk is in them, one entry per stay."""
    out: list[str] = []
    for _, callee, _ in dict.fromkeys(calls):  # each call once, in the order it first happens
        if callee.startswith(LEAVES):
            continue
        folder = callee.split("/")[0] if "/" in callee.split(":")[0] else callee.split(":")[0]
        if not out or out[-1] != folder:
            out.append(folder)
    return out


def summary(calls: list[tuple[str, str, bool]]) -> str:
    unique = set(calls)
    files = {name.split(":")[0] for call in unique for name in call[:2]}
    climbs = sorted({(a, b) for a, b, climb in unique if climb})
    entered = collections.Counter(b.split(":")[0] for b in {b for _, b, _ in unique})
    walk = stays(calls)
    lines = [f"files {len(files)}, calls {len(unique)}, climbs {len(climbs)}, stays {len(walk)}"]
    lines += [f"  climb: {a} -> {b}" for a, b in climbs]
    lines += ["  stays: " + " > ".join(walk)]
    lines += [f"  {n:3d} functions entered from elsewhere: {name}" for name, n in entered.most_common()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("course", type=Path)
    parser.add_argument("--student", default="walker")
    parser.add_argument("--kit", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    kit = args.kit.resolve()
    sys.path.insert(0, str(kit))
    import nbformat
    from traitlets.config import Config

    from grader.preprocessors import ReplayGrades

    assert Path(sys.modules["grader"].__file__).is_relative_to(kit), "another checkout's grader was imported"
    config = Config()
    config.CourseDirectory.root = str(args.course.resolve())
    nb = nbformat.read(args.notebook, 4)
    resources = {"nbgrader": {"student": args.student, "assignment": "backprop_ninja"}}
    grader = ReplayGrades(config=config)
    print(summary(trace(kit, lambda: grader.preprocess(nb, resources))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
