"""A PNG chart of a run's speedups over eager: one group of bars per sample, one bar per template."""

from __future__ import annotations

from typing import Any

from ..record import EAGER, ItemRecord, geomean
from .files import Run, RunError


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RunError("plot needs matplotlib: pip install 'pytest-inductor-templates[plot]'") from None
    return plt


def _speedup_axis(axes: Any) -> None:
    """A log axis labelled ``2x``: decades always, the ticks between them only where the axis spans about one
    decade or less (matplotlib's LogFormatter decides), so labels never run into each other."""
    import matplotlib.ticker

    class Times(matplotlib.ticker.LogFormatter):
        def __call__(self, value: float, pos: int | None = None) -> str:
            return f"{value:g}x" if super().__call__(value, pos) else ""

    axes.set_yscale("log")  # speedups are ratios: 2x and 0.5x lie as far from 1x
    axes.yaxis.set_major_formatter(Times(labelOnlyBase=True))
    axes.yaxis.set_minor_formatter(Times(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def _error_bar(record: ItemRecord | None) -> tuple[float, float]:
    """How far the 95% interval reaches below and above the speedup (nothing without one)."""
    if record is None or record.speedup is None or record.speedup_low is None or record.speedup_high is None:
        return (0.0, 0.0)
    return (record.speedup - record.speedup_low, record.speedup_high - record.speedup)


def speedup_figure(run: Run) -> Any:
    """Bars of speedup per (sample, device) and template with their 95% intervals, a geomean group (each bar with
    the number of samples it is over, also in the legend: templates may have been timed on different samples),
    a line at 1x; failures marked."""
    plt = _pyplot()
    compiled = {key: cell for key, cell in run.cells.items() if key[1] != EAGER and cell.bench is not None}
    if not compiled:
        raise RunError(f"{run.path}: no timed compiled entries to plot")
    templates = list(dict.fromkeys(t for _, t, _ in compiled))
    groups = list(dict.fromkeys(f"{s} [{d}]" for s, _, d in compiled))
    cells = {(f"{s} [{d}]", t): cell for (s, t, d), cell in compiled.items()}
    labels = [*groups, "geomean"]
    width = 0.8 / len(templates)
    figure, axes = plt.subplots()
    for index, template in enumerate(templates):
        benches = [cells[(g, template)].bench if (g, template) in cells else None for g in groups]
        speedups = [b.speedup if b is not None else None for b in benches]
        counted = sum(s is not None for s in speedups)  # a geomean is shown with the count it is over
        speedups.append(geomean(s for s in speedups if s is not None))
        positions = [i + (index - (len(templates) - 1) / 2) * width for i in range(len(labels))]
        heights = [s if s is not None else float("nan") for s in speedups]
        errors = [_error_bar(b) for b in benches] + [(0.0, 0.0)]  # the geomean has no interval
        label = f"{template} (geomean over {counted} sample{'s' if counted != 1 else ''})"
        bars = axes.bar(positions, heights, width, label=label, yerr=list(zip(*errors, strict=True)), capsize=2)
        texts = [f"{s:.3g}" if s is not None else "" for s in speedups]
        texts[-1] += f"\nn={counted}" if texts[-1] else ""
        axes.bar_label(bars, labels=texts, fontsize=6, padding=1)
        for position, group in zip(positions, groups, strict=False):  # the last position is the geomean
            cell = cells.get((group, template))
            if cell is not None and cell.verdict.failed:
                axes.annotate(
                    "x " + str(cell.verdict.outcome.value if cell.verdict.outcome else "?"),
                    (position, 1.0),
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="firebrick",
                )
    axes.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    _speedup_axis(axes)
    axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    axes.set_ylabel("speedup over eager\n(paired median, 95% interval)")
    gpu = run.gpu or "CPU"
    axes.set_title(f"pytest-inductor-templates: {run.path.rsplit('/', 1)[-1]} ({gpu})", fontsize=10)
    axes.legend(fontsize=8)
    _fit_around(figure, axes, (max(4.0, 0.9 * len(labels) * max(1, len(templates)) ** 0.5), 3.6))
    return figure


def _fit_around(figure: Any, axes: Any, size: tuple[float, float], pad: float = 0.15) -> None:
    """Give the axes ``size`` (inches) and size the figure around it, so that every label lies inside the image:
    long sample names, rotated, take room below and to the left, and the axis label, the title and the bar labels
    their own (``tight_layout`` shrank the axes instead, until the axis label stood out of the image)."""
    figure.set_size_inches(*size)
    figure.subplots_adjust(left=0, right=1, bottom=0, top=1)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    box, tight, dpi = axes.get_window_extent(renderer), axes.get_tightbbox(renderer), figure.dpi
    left, bottom = (box.x0 - tight.x0) / dpi + pad, (box.y0 - tight.y0) / dpi + pad
    right, top = (tight.x1 - box.x1) / dpi + pad, (tight.y1 - box.y1) / dpi + pad
    width, height = left + size[0] + right, bottom + size[1] + top
    figure.set_size_inches(width, height)
    figure.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height)


def plot_speedups(run: Run, output: str) -> None:
    """Write the run's speedup chart to ``output`` (a format matplotlib knows by the suffix, e.g. ``.png``)."""
    figure = speedup_figure(run)
    try:
        figure.savefig(output, dpi=120)
    except (OSError, ValueError) as error:
        raise RunError(f"{output}: cannot write: {getattr(error, 'strerror', None) or error}") from None
    finally:
        _pyplot().close(figure)
