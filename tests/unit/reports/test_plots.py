"""grader/reports/plots.py in-process: the heat map reads without telling red from green, its
share of points running from dark to light (as a grey copy or a colour-blind reader sees it)."""

from __future__ import annotations

import matplotlib.pyplot as plt

from grader.reports import plots


def _lightness(rgba) -> float:
    r, g, b, _ = rgba
    return 0.2126 * r + 0.7152 * g + 0.0722 * b  # relative luminance


def test_the_heat_map_runs_from_dark_to_light_and_is_not_red_green():
    fig = plots.heat_map(["alice", "bob"], ["ex1_dlogprobs", "ex2_dlogits"], [[0.0, 0.5], [1.0, 0.25]])
    try:
        cmap = fig.axes[0].images[0].get_cmap()
        assert cmap.name == plots.HEAT_MAP
        shades = [_lightness(cmap(x)) for x in (0.0, 0.25, 0.5, 0.75, 1.0)]
        assert shades == sorted(shades) and shades[-1] - shades[0] > 0.6
        r, g, _, _ = cmap(0.0)
        assert not (r > 0.5 and g < 0.3)  # no score is shown as red
    finally:
        plt.close(fig)
