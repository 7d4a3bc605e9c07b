"""The class report's figures (matplotlib, Agg: no display, the same PNG on any machine).

Each function takes plain numbers and returns a Figure; `save` writes it as a PNG and
returns the bytes, which class_report.py embeds in the HTML.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: a TA's machine or a CI runner has no display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ..exercise import spec  # noqa: E402


def score_distribution(scores: dict[str, list[float]], maxima: dict[str, float]) -> Figure:
    """One histogram per exercise and one of the total: `scores` maps "ex1".."total" to the
    class's points, `maxima` to their maximum (the x axis spans 0..max)."""
    names = list(scores)
    fig, axes = plt.subplots(1, len(names), figsize=(3.0 * len(names), 2.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        top = maxima[name]
        # one bar per whole point, centred on it (a bin edge at 1 would lump 1 and 2 together)
        bins = [k - 0.5 for k in range(int(top) + 2)] if top <= 60 else 30
        ax.hist(scores[name], bins=bins, color="#4c72b0", edgecolor="white")
        ax.set_xlim(-0.5, top + 0.5)
        ax.set_title(f"{name} /{top:g}")
        ax.set_xlabel("points")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0][0].set_ylabel("students")
    fig.tight_layout()
    return fig


def pass_rates(rates: list[tuple[str, float]], exercise_of: dict[str, int] | None = None) -> Figure:
    """Share of the class with full points, one bar per grade id, in backward order top-down;
    each bar in its exercise's colour (`exercise_of`: grade id -> exercise, Backprop Ninja's)."""
    exercise_of = exercise_of or {gid: g.exercise for gid, g in spec.BY_GRADE_ID.items()}
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(rates) + 1.2))
    labels = [gid for gid, _ in rates]
    values = [100 * r for _, r in rates]
    colors = [_exercise_color(exercise_of[gid]) for gid in labels]
    ax.barh(range(len(rates)), values, color=colors)
    ax.set_yticks(range(len(rates)), labels, fontsize=7)
    ax.invert_yaxis()  # the first gradient of the backward pass on top
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of students with full points")
    fig.tight_layout()
    return fig


HEAT_MAP = "cividis"


def heat_map(students: list[str], grade_ids: list[str], fractions: list[list[float]]) -> Figure:
    """Students (rows) x grade ids (columns), each cell the share of the points scored."""
    height = min(0.25 * len(students) + 2.0, 40.0)  # a big class stays a readable, finite image
    fig, ax = plt.subplots(figsize=(max(8.0, 0.25 * len(grade_ids) + 2.0), height))
    # cividis: dark blue (nothing) to yellow (every point), readable without telling red from green
    image = ax.imshow(fractions, cmap=HEAT_MAP, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(grade_ids)), grade_ids, rotation=90, fontsize=7)
    # a "$" in a student id would start matplotlib's math text: escaped; long ids are cut
    ticks = students if len(students) <= 80 else []
    ax.set_yticks(range(len(ticks)), [s[:24].replace("$", r"\$") for s in ticks], fontsize=7)
    fig.colorbar(image, ax=ax, fraction=0.03, label="share of points")
    fig.tight_layout()
    return fig


def _exercise_color(ex: int) -> str:
    return {1: "#4c72b0", 2: "#dd8452", 3: "#55a868", 4: "#c44e52"}.get(ex, "#8172b3")


def save(fig: Figure, path: Path) -> bytes:
    """The figure as PNG bytes, also written to `path`; the figure is closed (no leak in a loop)."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=100)
    finally:
        plt.close(fig)
    data = buf.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data
