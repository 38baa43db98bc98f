"""``--plot DIR``: one PNG per rule, one row per claim, one panel per metric the claim is about.

What the panels hold is decided in ``charts.py`` (plain data, tested); this module only draws it.
Bad is red with filled circles and solid lines, good is blue with hollow squares and dashed lines
drawn on top, so a good line lying exactly on the bad one still shows both.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from torchlint.verify.charts import VERDICT_COLORS, Chart, Panel, chart  # noqa: E402

STYLE = {
    "bad": dict(color="tab:red", marker="o", linestyle="-", linewidth=2, markersize=7, zorder=2),
    "good": dict(color="tab:blue", marker="s", linestyle="--", linewidth=2, markersize=12,
                 markerfacecolor="none", markeredgewidth=2, zorder=3),
}
HATCH = {"bad": None, "good": "//"}
ROW_HEIGHT = 4.6
PANEL_WIDTH = 5.6


def plot_records(records: list[dict], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    by_code: dict[str, list[Chart]] = defaultdict(list)
    for record in records:
        by_code[record["code"]].append(chart(record))
    written = []
    for code, charts in by_code.items():
        path = directory / f"{code}.png"
        draw(charts, path)
        written.append(path)
    return written


def draw(charts: list[Chart], path: Path) -> None:
    columns = max(len(each.panels) for each in charts)
    figure = plt.figure(figsize=(max(11.0, PANEL_WIDTH * columns), ROW_HEIGHT * len(charts)), layout="constrained")
    rows = figure.subfigures(len(charts), 1, squeeze=False)[:, 0]
    for row, each in zip(rows, charts):
        color = VERDICT_COLORS.get(each.verdict, "black")
        heading = textwrap.fill(each.title, 125)
        if each.subtitle:
            heading += "\n" + textwrap.fill(each.subtitle, 150)
        row.suptitle(heading, fontsize=9, color=color, fontweight="bold", ha="left", x=0.01)
        axes = row.subplots(1, len(each.panels), squeeze=False)[0]
        for axis, panel in zip(axes, each.panels):
            _draw_panel(axis, panel)
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _draw_panel(axis, panel: Panel) -> None:
    {"line": _line, "bars": _bars, "strip": _strip, "outcome": _outcome, "text": _text}[panel.kind](axis, panel)
    if panel.kind != "text":
        axis.set_title(panel.title, fontsize=9)
        axis.set_xlabel(panel.xlabel, fontsize=8)
        axis.set_ylabel(panel.ylabel, fontsize=8)
        axis.tick_params(labelsize=7)
        axis.grid(alpha=0.3)
    if panel.note and panel.kind not in ("text", "outcome"):
        axis.text(0.02, 0.97, panel.note, transform=axis.transAxes, fontsize=7, va="top",
                  bbox=dict(boxstyle="round", facecolor="white", alpha=0.85))


def _line(axis, panel: Panel) -> None:
    for series in panel.series:
        axis.plot(series.x, series.y, label=series.label, **STYLE[series.side])
        if series.y:
            axis.annotate(f"{series.y[-1]:.4g}", (series.x[-1], series.y[-1]), textcoords="offset points",
                          xytext=(6, 8 if series.side == "bad" else -12), fontsize=7, color=STYLE[series.side]["color"])
    steps = sorted({x for series in panel.series for x in series.x})
    if steps and len(steps) <= 12:
        axis.set_xticks(steps)
    values = [value for series in panel.series for value in series.y]
    low, high = min([0.0, *values]), max([0.0, *values])
    axis.set_ylim(low - 0.04 * (high - low or 1), high + 0.12 * (high - low or 1))
    axis.margins(x=0.08)
    axis.legend(fontsize=7, loc="best")


def _bars(axis, panel: Panel) -> None:
    steps = sorted({x for series in panel.series for x in series.x})
    width = 0.8 / max(1, len(panel.series))
    for index, series in enumerate(panel.series):
        positions = [steps.index(x) + (index - (len(panel.series) - 1) / 2) * width for x in series.x]
        bars = axis.bar(positions, series.y, width, label=series.label, color=STYLE[series.side]["color"],
                        alpha=0.75, hatch=HATCH[series.side], edgecolor="black")
        axis.bar_label(bars, fmt="%.4g", fontsize=7)
    axis.set_xticks(range(len(steps)), [str(step) for step in steps])
    axis.legend(fontsize=7, loc="lower right")


def _strip(axis, panel: Panel) -> None:
    for index, series in enumerate(panel.series):
        style = STYLE[series.side]
        if series.value is not None:
            axis.bar([index], [series.value], 0.6, color=style["color"], alpha=0.3, edgecolor="black",
                     hatch=HATCH[series.side])
        if series.y:
            spread = [index - 0.25 + 0.5 * i / max(1, len(series.y) - 1) for i in range(len(series.y))]
            axis.plot(spread, series.y, linestyle="none", marker=style["marker"], color=style["color"],
                      markersize=5, markerfacecolor=style.get("markerfacecolor", style["color"]), alpha=0.8)
    labels = [series.label + ("" if series.value is None else f"\nfastest step {series.value:.3g} ms")
              for series in panel.series]
    axis.set_xticks(range(len(panel.series)), labels, fontsize=8)
    axis.set_ylim(bottom=0)


def _outcome(axis, panel: Panel) -> None:
    rows = {"bad": 1, "good": 0}
    for series in panel.series:
        for x, raised in zip(series.x, series.y):
            if raised:
                axis.plot([x], [rows[series.side]], marker="X", color="tab:red", markersize=16, linestyle="none")
            else:
                axis.plot([x], [rows[series.side]], marker="o", color="tab:green", markersize=13, linestyle="none")
    steps = sorted({x for series in panel.series for x in series.x})
    axis.set_xticks(steps)
    axis.set_xlim(min(steps) - 0.7, max(steps) + 0.7)
    axis.set_yticks([rows[series.side] for series in panel.series], [series.label for series in panel.series],
                    fontsize=7)
    axis.set_ylim(-2.6, 1.6)
    axis.legend(handles=[Line2D([], [], marker="o", color="tab:green", linestyle="none", label="run completed"),
                         Line2D([], [], marker="X", color="tab:red", linestyle="none", markersize=10,
                                label="run raised")], fontsize=7, loc="upper right")
    axis.text(0.02, 0.03, panel.note, transform=axis.transAxes, fontsize=7, va="bottom", family="monospace",
              bbox=dict(boxstyle="round", facecolor="white", alpha=0.9))


def _text(axis, panel: Panel) -> None:
    axis.axis("off")
    axis.text(0.5, 0.5, textwrap.fill(panel.note, 80), transform=axis.transAxes, ha="center", va="center",
              fontsize=11, bbox=dict(boxstyle="round", facecolor="whitesmoke"))
