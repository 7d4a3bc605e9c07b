"""The class report's markup: one HTML page, no script, no network.

Every string a student could have shaped (ids, hints quoting their code, problems, log
lines) goes through quote.for_html; the page's Content-Security-Policy forbids scripts and
remote loads besides, so even a mistake here cannot make the page act or phone home.
"""

from __future__ import annotations

import base64
import hashlib
import html
from pathlib import Path
from statistics import median

from ..quote import for_html
from .class_data import ClassData
from .suspicious import Entry, grade_ids_text

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; }
.fail { background: #fde0dd; } .carried { background: #fff7bc; }
img { max-width: 100%; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; white-space: pre-wrap; }
"""


def anchor(student: str) -> str:
    """The id of a student's section: made of hex digits, whatever the student id holds."""
    return "student-" + hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def link(student: str) -> str:
    return f'<a href="#{anchor(student)}">{for_html(student, 100)}</a>'


def render(data: ClassData, images: dict[str, bytes]) -> str:
    sections = [
        _summary(data),
        _img("Score distribution", images["scores"]),
        _img("Pass rate of every graded gradient, in backward order", images["pass_rates"]),
        _pass_table(data),
        _img("Students x gradients (share of the points)", images["heat_map"]),
        _mistakes(data),
        _suspicious(data),
        _batch(data),
        _students(data),
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
        f"<title>{html.escape(data.exercise.assignment)}: class report</title>"
        f"<style>{_STYLE}</style></head><body>\n" + "\n".join(sections) + "\n</body></html>\n"
    )


def _summary(data: ClassData) -> str:
    n = len(data.scores)
    mean = sum(s.total for s in data.scores) / n if n else 0.0
    return (
        f"<h1>{html.escape(data.exercise.assignment)}: class report</h1>"
        f"<p id='summary'>{n} graded submissions; mean total {mean:.1f} / {data.exercise.total_points():g}; "
        f"{len(data.suspicious_students())} suspicious.</p>"
    )


def _img(title: str, png: bytes) -> str:
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='{src}'>"


def _pass_table(data: ClassData) -> str:
    rows = "".join(
        f"<tr><td>{gid}</td><td class='num'>{data.exercise.by_grade_id[gid].points:g}</td>"
        f"<td class='num'>{100 * rate:.0f}%</td></tr>"
        for gid, rate in data.pass_rates()
    )
    return (
        f"<table id='pass-rates'><tr><th>grade id</th><th>points</th><th>full points</th></tr>{rows}</table>"
    )


def _mistakes(data: ClassData) -> str:
    """One row per gradient that cost someone points: its most frequent hints, who got them."""
    rows = []
    for gid, mistakes in data.mistakes().items():
        items = "".join(
            f"<li><b>{len(m.students)} student{'s' if len(m.students) != 1 else ''}</b>: "
            f"{for_html(m.hint, 400)} in <code>{gid}</code> ({', '.join(link(s) for s in m.students)})</li>"
            for m in mistakes
        )
        rows.append(f"<tr><td>{gid}</td><td><ul>{items}</ul></td></tr>")
    if not rows:
        return "<h2 id='mistakes'>The class's mistakes</h2><p>No hints: every graded gradient was right.</p>"
    return (
        "<h2 id='mistakes'>The class's mistakes</h2><table><tr><th>grade id</th>"
        "<th>most frequent hints</th></tr>" + "".join(rows) + "</table>"
    )


def _suspicious(data: ClassData) -> str:
    """reports/suspicious.json by student, and the scan's other findings in their cells."""
    flagged = data.suspicious_students()
    if not flagged:
        return "<h2 id='suspicious'>Suspicious submissions</h2><p>None.</p>"
    parts = ["<h2 id='suspicious'>Suspicious submissions</h2><p>Grades follow the replay either way.</p>"]
    for student, entries in flagged.items():
        record = data.records.get(student, {})
        ids = lambda e: for_html(grade_ids_text(e.grade_ids, data.exercise))  # noqa: E731
        evidence = [
            f"<b>{for_html(e.kind)}</b>{_pair(e, student)} ({ids(e)}): " + _evidence(e.evidence)
            for e in entries
        ]
        evidence += [f"finding: {for_html(f, 500)}" for f in record.get("findings", [])]
        score = f"{record['score']:g} / {record['max_score']:g}" if "score" in record else "no replay record"
        parts.append(
            f"<h3>{link(student)}: {score}</h3><ul>{''.join(f'<li>{e}</li>' for e in evidence)}</ul>"
        )
    return "".join(parts)


def _evidence(text: str) -> str:
    """A line, or (a similar pair's lines side by side) a block."""
    lines = text.split("\n")
    if len(lines) == 1:
        return for_html(text, 500)
    return "<pre>" + "\n".join(for_html(line, 300) for line in lines[:30]) + "</pre>"


def _pair(entry: Entry, student: str) -> str:
    others = [link(s) for s in entry.students if s != student]
    return f" with {', '.join(others)}" if others else ""


def _batch(data: ClassData) -> str:
    parts = ["<h2 id='batch'>The batch: problems and timings</h2>"]
    seconds = [r["replay_seconds"] for r in data.records.values() if r.get("replay_seconds") is not None]
    if data.batch:
        parts.append(
            f"<p>Batch: {data.batch.get('seconds', '?')} s on {for_html(data.batch.get('workers', '?'))} "
            "worker(s).</p>"
        )
    if seconds:
        parts.append(
            f"<p>Replay: median {median(seconds):.1f} s, slowest {max(seconds):.1f} s, "
            f"{len(seconds)} records.</p>"
        )
    rows = []
    for student, record in sorted(data.records.items()):
        problems = list(record.get("problems") or [])
        problems += (data.batch.get("students", {}).get(student) or {}).get("preflight", [])
        cell = "<br>".join(for_html(html.unescape(str(p)), 500) for p in problems)
        rows.append(
            f"<tr><td>{link(student)}</td><td class='num'>{for_html(record.get('replay_seconds', ''))}</td>"
            f"<td>{cell}</td></tr>"
        )
    parts.append(
        "<table id='timings'><tr><th>student</th><th>replay seconds</th><th>problems</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    if data.log:
        lines = data.log[-300:]  # the newest; the file has all of them
        name = data.exercise.batch_files(Path("reports"))[0]
        parts.append(f"<h3>{name}</h3><pre>" + "\n".join(for_html(l) for l in lines) + "</pre>")
    return "".join(parts)


def _students(data: ClassData) -> str:
    parts, flagged = ["<h2 id='students'>Students</h2>"], data.suspicious_students()
    for s in data.scores:
        record = data.records.get(s.student, {})
        verdicts = record.get("verdicts", {})
        ex = data.exercise
        totals = ", ".join(f"ex{e} {s.exercise(e):g}/{ex.exercise_points(e):g}" for e in ex.exercises)
        rows = []
        for gid in data.grade_ids:
            score, v = s.by_grade_id.get(gid, 0.0), verdicts.get(gid) or {}
            full = data.full_marks(s, gid)
            cls = "carried" if full and v.get("carried") else "" if full else "fail"
            rows.append(
                f"<tr class='{cls}'><td>{gid}</td><td class='num'>{score:g}/{ex.by_grade_id[gid].points:g}"
                f"</td><td>{for_html(v.get('hint') or '', 600)}</td></tr>"
            )
        flag = " (suspicious)" if s.student in flagged else ""
        missing = "" if record else "<p>No replay record.</p>"
        parts.append(
            f"<section id='{anchor(s.student)}'><h3>{for_html(s.student, 100)}{flag}: "
            f"{s.total:g} / {ex.total_points():g}</h3><p>{totals}</p>{missing}"
            "<table><tr><th>grade id</th><th>score</th><th>hint</th></tr>"
            + "".join(rows)
            + "</table></section>"
        )
    return "".join(parts)
