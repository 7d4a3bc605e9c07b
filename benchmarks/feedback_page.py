"""What one feedback page costs: the kit's FeedbackExporter against nbconvert's HTMLExporter
(which parses its whole page again with BeautifulSoup), on the same graded notebook, with the
configuration `nbgrader generate_feedback` gives the exporter. Prints CPU-s a page, the ratio,
and whether the two pages say the same (text, images' alt); asserts nothing.

    .venv/bin/python benchmarks/feedback_page.py [NOTEBOOK] [--pages N]

NOTEBOOK: an autograded notebook (default: the first under autograded/, as `make demo` leaves
them; else the instructor's notebook, without outputs).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402
from bs4 import BeautifulSoup  # noqa: E402
from nbconvert.exporters import HTMLExporter  # noqa: E402
from nbgrader.converters import GenerateFeedback  # noqa: E402
from nbgrader.coursedir import CourseDirectory  # noqa: E402

from grader.exercise import spec  # noqa: E402
from grader.preprocessors import FeedbackExporter  # noqa: E402


def _notebook(path: Path | None) -> tuple[Path, nbformat.NotebookNode]:
    found = sorted(ROOT.glob(f"autograded/*/{spec.ASSIGNMENT}/{spec.NOTEBOOK}.ipynb"))
    path = path or (found[0] if found else ROOT / "source" / spec.ASSIGNMENT / f"{spec.NOTEBOOK}.ipynb")
    nb = nbformat.read(path, 4)
    for cell in nb.cells:  # the scores GetGrades would add from the gradebook
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            meta.setdefault("score", meta.get("points", 0))
    return path, nb


def _cpu_a_page(render, exporter, nb, pages: int) -> tuple[float, str]:
    resources = {"nbgrader": {"notebook": spec.NOTEBOOK, "score": 1.0, "max_score": 1.0, "late_penalty": 0}}
    render(exporter, nb, dict(resources))  # templates loaded, lexers made
    t0 = time.process_time()
    for _ in range(pages):
        page, _ = render(exporter, nb, dict(resources))
    return (time.process_time() - t0) / pages, page


def _says(page: str):
    soup = BeautifulSoup(page, "html.parser")
    return soup.get_text(), [img.get("alt") for img in soup.find_all("img")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path)
    parser.add_argument("--pages", type=int, default=10)
    args = parser.parse_args()
    path, nb = _notebook(args.notebook)
    config = GenerateFeedback(coursedir=CourseDirectory(root=str(ROOT))).config
    exporter = FeedbackExporter(config=config)
    theirs, their_page = _cpu_a_page(HTMLExporter.from_notebook_node, exporter, nb, args.pages)
    ours, our_page = _cpu_a_page(FeedbackExporter.from_notebook_node, exporter, nb, args.pages)
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(nb.cells)} cells")
    print(f"nbconvert's HTMLExporter (baseline): {theirs:.3f} CPU-s a page")
    print(f"the kit's FeedbackExporter:           {ours:.3f} CPU-s a page, {theirs / ours:.2f}x faster")
    print(f"same text and alt text: {'yes' if _says(our_page) == _says(their_page) else 'NO'}")


if __name__ == "__main__":
    main()
