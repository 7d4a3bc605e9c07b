"""`backprop-ninja gradescope build OUT.zip [--course DIR] [--assignment NAME] [--visibility V]
[--allow-unsandboxed]`: the autograder zip.
`... prepare --source DIR` and `... run [--root DIR]`: on Gradescope, where setup.sh and
run_autograder call them as `python3 -m grader.gradescope ...` (scripts.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..exercise import spec
from . import build, course, results, run


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="backprop-ninja gradescope", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the zip to upload as the Gradescope autograder")
    b.add_argument("out", type=Path)
    b.add_argument("--course", type=Path, default=Path("."), help="the course folder (default: .)")
    b.add_argument(
        "--assignment",
        default=spec.ASSIGNMENT,
        help=f"the assignment it grades: {spec.ASSIGNMENT} (default) or one written by `backprop-ninja new`",
    )
    b.add_argument("--visibility", choices=results.VISIBILITIES, default="visible", help="of each test")
    b.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="grade even where bubblewrap cannot start (students' code then runs WITHOUT the sandbox, "
        "as another user, with the solutions closed to it); default: such submissions are not graded",
    )
    p = sub.add_parser("prepare", help="setup.sh: generate the release once")
    p.add_argument("--source", type=Path, required=True, help="where the zip was extracted")
    r = sub.add_parser("run", help="run_autograder: grade the submission, write results/results.json")
    r.add_argument("--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT") or run.DEFAULT_ROOT))
    args = ap.parse_args(argv)
    if args.command == "build":
        try:
            out = build.build(
                out=args.out,
                course=args.course,
                assignment=args.assignment,
                visibility=args.visibility,
                allow_unsandboxed=args.allow_unsandboxed,
            )
        except build.BuildError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MB): upload it as the Gradescope autograder")
        if args.allow_unsandboxed:
            print("WARNING: this zip grades WITHOUT a sandbox where bubblewrap cannot start", file=sys.stderr)
    elif args.command == "prepare":
        course.prepare_zip(args.source.resolve())
    else:
        run.run(root=args.root.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
