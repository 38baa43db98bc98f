"""``--plot DIR``: one chart per rule of live bytes per step, bad against good (needs matplotlib)."""

from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402


def _curve(figures: dict) -> tuple[list[int], list[int]] | None:
    """Live bytes read after every step when the fixture reports steps, else after each run."""
    per_step = figures.get("live_bytes_per_step")
    if per_step:
        return list(range(1, len(per_step) + 1)), per_step
    if figures.get("steps"):
        return figures["steps"], figures["live_bytes"]
    return None


def plot_records(records: list[dict], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    by_code: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_code[record["code"]].append(record)
    written = []
    for code, claims in by_code.items():
        figure, axes = plt.subplots(1, len(claims), figsize=(5 * len(claims), 4), squeeze=False)
        for axis, record in zip(axes[0], claims):
            for side, style, color in (("bad", "o-", "tab:red"), ("good", "s--", "tab:blue")):
                curve = _curve(record[side])
                if curve:
                    axis.plot(curve[0], [value / 1024 for value in curve[1]], style, color=color,
                              label=f"{side}: {record[side]['fixture']}")
                if record[side].get("exception"):
                    axis.plot([], [], " ", label=f"{side} raised {record[side]['exception']['type']}")
            title = textwrap.fill(record["claim"], 60)
            axis.set_title(f"{title}\n{code}: {record['verdict']}", fontsize=8)
            axis.set_xlabel("step")
            axis.set_ylabel(f"live KiB ({record['device']})")
            axis.legend(fontsize=7)
            axis.grid(alpha=0.3)
        figure.tight_layout()
        path = directory / f"{code}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
    return written
