"""Claims: what each rule says about memory, errors or cost, as a check over measurements.

One module per rule (``tl101.py`` …, plus ``nonrules.py`` for the guide claims the measurements
refute) defines ``CLAIMS``: a list of ``Claim``. A claim names a bad and a good program (a fixture
file and function), which figures it needs (memory always; timed runs when ``timing`` > 0) and a
``check(bad, good) -> Outcome`` with explicit thresholds. Checks raise ``FixtureFailed`` when a
program did something the claim did not expect (verdict ``error``), return ``Outcome(False, …)``
when the numbers contradict the claim (``refuted``).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

CONFIRMED, REFUTED, NEEDS_CUDA, ERROR = "confirmed", "refuted", "needs-cuda", "error"
VERDICTS = (CONFIRMED, REFUTED, NEEDS_CUDA, ERROR)
NONRULES_DIR = Path(__file__).resolve().parent.parent / "nonrules"


class FixtureFailed(Exception):
    """A program failed (or behaved) in a way its claim does not expect."""


@dataclass(frozen=True)
class Program:
    """A fixture function: ``path`` is relative to the fixtures directory unless absolute."""

    path: str
    function: str = "run"

    def resolve(self, fixtures_dir: Path) -> Path:
        path = Path(self.path)
        return path if path.is_absolute() else fixtures_dir / path


@dataclass
class Outcome:
    holds: bool
    bad: str  # one-line summaries of the figures the check used, for the text table
    good: str
    detail: str = ""


@dataclass
class Claim:
    code: str
    claim: str
    metric: str
    bad: Program
    good: Program
    check: Callable[[Measured, Measured], Outcome]
    needs_cuda: bool = False  # only measurable on a GPU: needs-cuda on CPU
    timing: int = 0  # repeats of timed runs (best of); 0 = memory only
    timing_steps: tuple[int, ...] = ()  # step counts of the timed runs; () = the memory step counts
    step_counts: tuple[int, ...] | None = None  # None: derived from --steps
    cuda_check: Callable[[Measured, Measured], Outcome] | None = None  # replaces check on CUDA
    # What `--plot` draws: one panel per entry, each the claim's own metric (see ``charts.py``).
    chart: tuple[str, ...] = ("live_bytes",)
    # Non-rules only: the guide's claim, quoted, and where it is ("file › section").
    guide: str = ""
    guide_source: str = ""


def nonrule_program(filename: str, function: str = "run") -> Program:
    return Program(str(NONRULES_DIR / filename), function)


class Measured:
    """The probe's measurements of one program, with the arithmetic claims need."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result
        self.runs: list[dict[str, Any]] = result.get("runs", [])
        self.timing: list[dict[str, Any]] = result.get("timing", [])
        self.error = result.get("error")

    @property
    def steps(self) -> list[int]:
        return [run["steps"] for run in self.runs]

    def series(self, key: str) -> list[float]:
        return [run.get(key, 0) for run in self.runs]

    def last(self, key: str) -> float:
        """The figure of the run with the most steps."""
        return self.runs[-1].get(key, 0)

    def increments(self, key: str) -> list[float]:
        """Growth per step between consecutive step counts."""
        values, steps = self.series(key), self.steps
        return [(values[i + 1] - values[i]) / (steps[i + 1] - steps[i]) for i in range(len(values) - 1)]

    def slope(self, key: str) -> float:
        """Least-squares growth per step over all step counts."""
        return _slope(self.steps, self.series(key))

    def time_per_step(self, key: str = "cpu_s") -> float:
        """The fastest single step's time (``cpu_s`` or ``wall_s``; wall for GPU work) when the
        program reports steps (``step_hook``): other processes and interrupts only ever add time,
        so the minimum is the stable figure on a shared machine. Otherwise the slope of the best
        total time over the step counts."""
        steps = [value for run in self.timing for value in run.get("step_" + key, [])]
        if steps:
            return min(steps)
        return _slope([run["steps"] for run in self.timing], [run[key] for run in self.timing])

    @property
    def exceptions(self) -> list[dict[str, str] | None]:
        return [run.get("exception") for run in self.runs]

    def figure(self, name: str) -> Any:
        """A named figure of the run with the most steps."""
        return self.runs[-1].get("figures", {}).get(name) if self.runs else None

    def figure_values(self, name: str) -> list:
        """Every value of a named figure over all runs: a figure recorded every step is a list,
        one recorded once per run a single value. Empty when any run lacks it."""
        values = []
        for run in self.runs:
            value = run.get("figures", {}).get(name)
            if value is None:
                return []
            values.extend(value if isinstance(value, list) else [value])
        return values

    def expect_clean(self) -> None:
        """Raise FixtureFailed unless every run completed without an exception."""
        self.expect_ran()
        for run in self.runs:
            if run.get("exception"):
                raise FixtureFailed(f"{self.name}: run({run['steps']}) raised {_exception_text(run['exception'])}")
        for run in self.timing:
            if run.get("exception"):
                raise FixtureFailed(f"{self.name}: timed run raised {_exception_text(run['exception'])}")

    def expect_ran(self) -> None:
        if self.error:
            raise FixtureFailed(f"{self.name}: {_exception_text(self.error)}")
        if not self.runs:
            raise FixtureFailed(f"{self.name}: no measurement")

    @property
    def name(self) -> str:
        fixture = Path(self.result.get("fixture", "?"))
        return f"{fixture.parent.name}/{fixture.name}"


def _slope(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread else 0.0


def _exception_text(exception: dict[str, str]) -> str:
    message = exception.get("message", "").splitlines()
    return f"{exception.get('type')}: {message[0] if message else ''}"


# ------------------------------------------------------------------------------ formatting
def human_bytes(value: float) -> str:
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    return f"{sign}{value} B"  # unreachable


def per_step_bytes(value: float) -> str:
    return ("+" if value >= 0 else "") + human_bytes(value) + "/step"


# ------------------------------------------------------------------------------ common checks
def grows_linearly_vs_flat(key: str, min_per_step: float, flat_per_step: float = 0.0,
                           linear_tolerance: float = 0.05) -> Callable[[Measured, Measured], Outcome]:
    """Bad grows by at least ``min_per_step`` every step, the same amount each interval (within
    ``linear_tolerance``); good grows by at most ``flat_per_step``."""

    def check(bad: Measured, good: Measured) -> Outcome:
        bad.expect_clean()
        good.expect_clean()
        increments = bad.increments(key)
        good_slope = good.slope(key)
        linear = max(increments) - min(increments) <= linear_tolerance * max(abs(v) for v in increments)
        holds = min(increments) >= min_per_step and linear and good_slope <= flat_per_step
        unit = per_step_bytes if key.endswith("bytes") else (lambda v: f"{v:+g} {key.replace('graph_', '')}/step")
        return Outcome(
            holds, unit(bad.slope(key)), unit(good_slope),
            f"bad {key} per step {', '.join(f'{v:g}' for v in increments)} (need >= {min_per_step:g}, "
            f"equal within {linear_tolerance:.0%}); good slope {good_slope:g} (need <= {flat_per_step:g})",
        )

    return check


def raised(measured: Measured, error_type: str, contains: str) -> tuple[bool, str]:
    """Did every run raise ``error_type`` with ``contains`` in its message? A different exception
    means the program is broken (FixtureFailed); no exception means the claim does not hold."""
    measured.expect_ran()
    for exception in measured.exceptions:
        if exception is None:
            return False, "no exception"
        if exception["type"] != error_type or contains.lower() not in exception["message"].lower():
            raise FixtureFailed(f"{measured.name}: unexpected {_exception_text(exception)}")
    return True, _exception_text(measured.exceptions[-1])


def grows_faster(key: str, min_per_step: float, min_ratio: float) -> Callable[[Measured, Measured], Outcome]:
    """Bad grows linearly by at least ``min_per_step`` and at least ``min_ratio`` × good's growth
    (for fixes that still keep something per step, such as detached outputs)."""

    def check(bad: Measured, good: Measured) -> Outcome:
        bad.expect_clean()
        good.expect_clean()
        increments = bad.increments(key)
        bad_slope, good_slope = bad.slope(key), good.slope(key)
        linear = max(increments) - min(increments) <= 0.05 * max(abs(v) for v in increments)
        ratio = bad_slope / good_slope if good_slope > 0 else float("inf")
        holds = min(increments) >= min_per_step and linear and ratio >= min_ratio
        less = f" ({ratio:.1f}x less)" if good_slope else ""
        return Outcome(
            holds, per_step_bytes(bad_slope), per_step_bytes(good_slope) + less,
            f"bad {key} per step {', '.join(f'{v:g}' for v in increments)} (need >= {min_per_step:g}, "
            f"equal within 5%), {ratio:.2f}x good's (need >= {min_ratio:g})",
        )

    return check


def stays_flat(key: str) -> Callable[[Measured, Measured], Outcome]:
    """Neither program's ``key`` changes with the step count."""

    def check(bad: Measured, good: Measured) -> Outcome:
        bad.expect_clean()
        good.expect_clean()
        bad_slope, good_slope = bad.slope(key), good.slope(key)
        return Outcome(bad_slope == 0 and good_slope == 0, per_step_bytes(bad_slope), per_step_bytes(good_slope),
                       f"{key} flat in both: bad slope {bad_slope:g}, good slope {good_slope:g}")

    return check


def good_retains_no_graph(bad: Measured, good: Measured) -> Outcome:
    """What the good program keeps holds no autograd node at any step count."""
    good.expect_clean()
    nodes = good.series("graph_nodes")
    return Outcome(max(nodes) == 0, f"{bad.last('graph_nodes'):g} nodes kept",
                   f"{max(nodes):g} nodes kept", f"good keeps {max(nodes)} graph nodes (need 0)")


def allocations_grow_quadratically(min_ratio: float = 1.3) -> Callable[[Measured, Measured], Outcome]:
    """Bad's allocations per step keep rising (each step redoes the earlier steps' work): the
    last interval's allocations per step are at least ``min_ratio`` × the first interval's; good's
    stay constant per step."""

    def check(bad: Measured, good: Measured) -> Outcome:
        bad_increments, good_increments = bad.increments("allocations"), good.increments("allocations")
        ratio = bad_increments[-1] / bad_increments[0] if bad_increments[0] else float("inf")
        holds = ratio >= min_ratio and max(good_increments) == min(good_increments)
        return Outcome(
            holds, "allocs/step " + "->".join(f"{v:g}" for v in bad_increments),
            "allocs/step " + "->".join(f"{v:g}" for v in good_increments),
            f"bad allocations per step rise {ratio:.2f}x over the step counts (need >= {min_ratio}); good constant",
        )

    return check


def raises_vs_clean(error_type: str, contains: str, clean_below: int = 0) -> Callable[[Measured, Measured], Outcome]:
    """Bad raises ``error_type`` mentioning ``contains`` in every run of ``clean_below`` steps or
    more (and not below); good completes every run with flat live memory."""

    def check(bad: Measured, good: Measured) -> Outcome:
        good.expect_clean()
        bad.expect_ran()
        short = [run for run in bad.runs if run["steps"] < clean_below]
        for run in short:
            if run.get("exception"):
                return Outcome(False, f"raised at {run['steps']} step(s)", "ok",
                               f"bad raised before step {clean_below}: {_exception_text(run['exception'])}")
        long = Measured({**bad.result, "runs": [run for run in bad.runs if run["steps"] >= clean_below]})
        did_raise, text = raised(long, error_type, contains)
        good_slope = good.slope("live_bytes")
        when = f" from step {clean_below} on" if clean_below else ""
        return Outcome(
            did_raise and good_slope <= 0, _shorten(text, 60) + (f" from step {clean_below}" if clean_below else ""),
            f"runs, {per_step_bytes(good_slope)}",
            f"bad raises {error_type} containing {contains!r}{when}: {did_raise}; good runs with live bytes flat",
        )

    return check


def good_parameters_change(min_change: float = 1e-4) -> Callable[[Measured, Measured], Outcome]:
    """The good program's ``param_delta`` figure (how far training moved its parameters) is at
    least ``min_change`` in every run."""

    def check(bad: Measured, good: Measured) -> Outcome:
        good.expect_clean()
        deltas = [run.get("figures", {}).get("param_delta") for run in good.runs]
        if any(not isinstance(delta, (int, float)) for delta in deltas):
            return Outcome(False, "", "no param_delta", "the good fixture must record param_delta")
        return Outcome(min(deltas) >= min_change, "", f"params moved {deltas[-1]:.3g}",
                       f"good's parameters moved by >= {min_change:g} (smallest {min(deltas):.3g})")

    return check


def all_of(*checks: Callable[[Measured, Measured], Outcome]) -> Callable[[Measured, Measured], Outcome]:
    """Every check holds; summaries and details joined."""

    def check(bad: Measured, good: Measured) -> Outcome:
        outcomes = [each(bad, good) for each in checks]
        return Outcome(
            all(outcome.holds for outcome in outcomes),
            "; ".join(outcome.bad for outcome in outcomes if outcome.bad),
            "; ".join(outcome.good for outcome in outcomes if outcome.good),
            "; ".join(outcome.detail for outcome in outcomes),
        )

    return check


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


# ------------------------------------------------------------------------------ discovery
def all_claims() -> list[Claim]:
    claims: list[Claim] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        claims.extend(getattr(module, "CLAIMS", []))
    return sorted(claims, key=lambda claim: (claim.code.startswith("NR"), claim.code))
