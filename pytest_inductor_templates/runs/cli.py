"""The ``pytest-inductor-templates`` command: compare, merge, report and plot saved runs.

Exit codes: 0 done (and no --fail-on condition met), 1 a --fail-on condition met,
2 a bad command line, an unusable input file, or nothing that could be compared.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..machine import installed_version
from . import compare as comparing
from . import compare_output
from .compile_changes import NOISE_SECONDS
from .files import RunError, load, merge, write_text

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2


LIMITED = ("speedup", "compile-time", "memory")  # the conditions with a limit, KIND:N%
GATES = (*LIMITED, "graph-breaks", "correctness")


def fail_on(text: str) -> tuple[str, float]:
    """``speedup:5%``, ``compile-time:20%`` or ``memory:10%`` (a fraction, 0.05), ``graph-breaks`` or
    ``correctness``."""
    if text in ("correctness", "graph-breaks"):
        return (text, 0.0)
    kind, _, limit = text.partition(":")
    if kind in LIMITED and limit:
        try:
            value = float(limit.removesuffix("%"))
        except ValueError:
            pass
        else:
            if value >= 0:
                return (kind, value / 100)
    raise argparse.ArgumentTypeError(
        f"{text!r}: expected speedup:N% (e.g. speedup:5%), compile-time:N% (e.g. compile-time:20%), memory:N% "
        "(e.g. memory:10%), graph-breaks or correctness"
    )


class _OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, naming ``--help``, and exit 2 (not the usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (--help for usage)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="pytest-inductor-templates",
        description="Compare, merge, report and plot pytest-benchmark JSON runs of pytest-inductor-templates.",
        epilog="Exit codes: 0 done, 1 a --fail-on condition met, 2 bad usage, an unusable file or nothing to compare.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {installed_version('pytest-inductor-templates') or '(not installed)'}",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    compare = commands.add_parser("compare", help="speedup, time, memory and correctness changes from BASE to NEW")
    compare.add_argument("base", metavar="BASE.json")
    compare.add_argument("new", metavar="NEW.json")
    compare.add_argument(
        "--fail-on",
        type=fail_on,
        action="append",
        default=[],
        metavar="CONDITION",
        help="exit 1 when a template's speedup fell significantly further than N%% on any sample or in its "
        "geomean: the change's whole 95%% interval, from both runs' intervals, lies below -N%% (speedup:N%%); "
        "when an item's compile time (or a template's mean), compiled in the same cache state by as many "
        "pytest-xdist workers, grew by more than N%% and by 1 s or more (compile-time:N%%); when an item's memory "
        "ratio (eager peak / compiled peak, CUDA) fell by more than N%% (memory:N%%); when an item gained graph "
        "breaks or recompiles (graph-breaks); or when an item newly fails (correctness); repeatable",
    )
    compare.add_argument("--format", choices=("table", "markdown", "json", "html"), default="table")
    compare.add_argument("-o", "--output", metavar="OUT", help="write the comparison here (default: stdout)")
    merge_command = commands.add_parser("merge", help="one run from shards run on other workers or machines")
    merge_command.add_argument("runs", nargs="+", metavar="RUN.json")
    merge_command.add_argument("-o", "--output", required=True, metavar="OUT.json")
    report = commands.add_parser(
        "report", help="a run as markdown or one HTML page: samples x templates, outcome, effect, speedup"
    )
    report.add_argument("run", metavar="RUN.json")
    report.add_argument("--format", choices=("markdown", "html"), default="markdown")
    report.add_argument("-o", "--output", metavar="OUT", help="write the report here (default: stdout)")
    plot = commands.add_parser("plot", help="a chart of speedup per template and sample (needs matplotlib)")
    plot.add_argument("run", metavar="RUN.json")
    plot.add_argument("-o", "--output", required=True, metavar="OUT.png")
    return parser


def _compare(args: argparse.Namespace) -> int:
    comparison = comparing.compare_runs(load(args.base), load(args.new))
    limits = {gate: [limit for kind, limit in args.fail_on if kind == gate] for gate in GATES}
    failures = comparison.correctness_drops() if limits["correctness"] else []
    failures += comparison.compiles.gained() if limits["graph-breaks"] else []
    why = comparison.incomparable(speedups=bool(limits["speedup"]) or not args.fail_on)
    compile_why = comparison.compiles.why_not if limits["compile-time"] else None
    waived: list[str] = []
    for limit in limits["speedup"] if not why else ():
        flagged, within_noise = comparison.speedup_drops(limit)
        failures += flagged
        waived += within_noise
    compile_waived: list[str] = []
    for limit in limits["compile-time"] if not compile_why else ():
        flagged, within_noise = comparison.compiles.grown(limit)
        failures += flagged
        compile_waived += within_noise
    if (why or compile_why) and not failures:  # a failure found is a verdict even where the rest does not compare
        raise RunError(f"nothing to compare: {why or f'compile times: {compile_why}'}")
    if why:
        print(f"speedups not compared: {why}", file=sys.stderr)
    if compile_why:
        print(f"compile times not compared: {compile_why}", file=sys.stderr)
    failures += _memory_failures(comparison, limits["memory"], failures)
    if args.format == "json":
        _emit(compare_output.as_json(comparison, failures), args.output)
        return EXIT_REGRESSION if failures else EXIT_OK
    if args.format == "html":
        from .html_compare import Gate, compare_page

        gate = Gate({kind: found for kind, found in limits.items() if found}, failures, waived + compile_waived)
        _emit(compare_page(comparison, gate), args.output)
        return EXIT_REGRESSION if failures else EXIT_OK
    markdown = args.format == "markdown"
    lines = [compare_output.as_markdown(comparison) if markdown else compare_output.as_table(comparison)]
    if waived:
        lines.append(
            "\nnot flagged: fell by more than the limit, but the 95% interval of the change reaches within it:"
        )
        lines += [f"- {line}" for line in waived]
    if compile_waived:
        lines.append(
            f"\nnot flagged: grew by more than the limit, but by less than {NOISE_SECONDS:g} s (compile-time noise):"
        )
        lines += [f"- {line}" for line in compile_waived]
    if failures:
        lines.append("\n" + ("**FAILED**" if markdown else "FAILED") + ":")
        lines += [f"- {line}" for line in failures]
    _emit("\n".join(lines), args.output)
    return EXIT_REGRESSION if failures else EXIT_OK


def _memory_failures(comparison: comparing.RunComparison, limits: list[float], failures: list[str]) -> list[str]:
    """The memory ratios that fell by more than each limit. No ratio in both runs is nothing to compare (a RunError),
    unless ``failures`` already fail the run: then it is said on stderr."""
    if not limits:
        return []
    if (why := comparison.memory_incomparable()) is not None:
        if not failures:
            raise RunError(f"nothing to compare: {why}")
        print(f"memory ratios not compared: {why}", file=sys.stderr)
        return []
    return [line for limit in limits for line in comparison.memory_drops(limit)]


def _merge(args: argparse.Namespace) -> int:
    merged, notes = merge([load(path) for path in args.runs])
    write_text(args.output, json.dumps(merged, indent=4))
    print(f"merged {len(args.runs)} runs ({len(merged['benchmarks'])} timed entries) into {args.output}")
    for note in notes:
        print(note)
    return EXIT_OK


def _emit(text: str, output: str | None) -> None:
    """Print ``text``, or write it to ``output`` and say so."""
    if output is None:
        print(text)
        return
    write_text(output, text)
    print(f"wrote {output}")


def _report(args: argparse.Namespace) -> int:
    run = load(args.run)
    if args.format == "html":
        from .html_page import run_page

        _emit(run_page(run), args.output)
        return EXIT_OK
    from .markdown import as_markdown

    _emit(as_markdown(run), args.output)
    return EXIT_OK


def _plot(args: argparse.Namespace) -> int:
    from .plot import plot_speedups

    plot_speedups(load(args.run), args.output)
    print(f"wrote {args.output}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"compare": _compare, "merge": _merge, "report": _report, "plot": _plot}[args.command](args)
    except RunError as error:
        print(f"pytest-inductor-templates {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
