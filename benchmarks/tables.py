"""Tables as docs/results.md shows them, for the benchmarks' ``--markdown``: one helper that lays
out a markdown table from cells, and the number formats the page uses (thousands separators,
ratios, per-event times, shares), so that every script's table reads like the page's."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: Markdown column alignments, as the page writes them.
LEFT, RIGHT = "---", "---:"
#: A column: (header, alignment).
Column = tuple[str, str]


def markdown_table(columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table of ``rows`` (cells as text) under ``columns``.

    :raises ValueError: when a row has more or fewer cells than there are columns (a table
        pasted over the page's must keep its columns).
    """
    lines = ["| " + " | ".join(header for header, _ in columns) + " |",
             "|" + "|".join(alignment for _, alignment in columns) + "|"]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"a row of {len(row)} cells under {len(columns)} columns: {row}")
        # An empty cell as the page writes one: "| |".
        lines.append("|" + "|".join(f" {cell.replace('|', '/')} " if cell else " "
                                    for cell in row) + "|")
    return "\n".join(lines)


def plain_table(columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> str:
    """The same cells as :func:`markdown_table`, in aligned columns for a terminal (bold
    marks dropped)."""
    grid = [[header for header, _ in columns],
            *([cell.replace("**", "") for cell in row] for row in rows)]
    widths = [max(len(line[index]) for line in grid) for index in range(len(columns))]
    return "\n".join("  ".join(cell.rjust(width) if alignment == RIGHT else cell.ljust(width)
                               for cell, width, (_, alignment) in zip(line, widths, columns)
                               ).rstrip()
                     for line in grid)


def print_tables(columns: Sequence[Column], rows: Sequence[Sequence[str]], markdown: bool) -> None:
    """Print the plain table, and the page's markdown one where ``markdown``."""
    print(plain_table(columns, rows))
    if markdown:
        print(markdown_table(columns, rows))


def number(value: float | None, decimals: int = 0, missing: str = "-") -> str:
    """``value`` with thousands separators (``36,985``, ``1,640.5``); ``missing`` for None/NaN."""
    if value is None or math.isnan(value):
        return missing
    return f"{value:,.{decimals}f}"


def times(value: float | None, missing: str = "-") -> str:
    """A ratio as the page writes a speed-up: ``1.30x``."""
    return missing if value is None or math.isnan(value) else f"{value:.2f}x"


def figures(value: float, digits: int = 3) -> str:
    """``digits`` significant figures, at most 2 decimals: ``0.70``, ``17.1``, ``158``."""
    if value == 0 or math.isnan(value) or math.isinf(value):
        return f"{value:.2f}"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    return f"{value:,.{min(2, max(0, decimals))}f}"


def percent(share: float) -> str:
    """A share (0.04 = 4 %) as the page writes it: ``4.0 %``, ``0.04 %``, ``0.005 %``."""
    value = 100.0 * share
    return f"{value:.1f} %" if value >= 0.1 or value == 0 else f"{value:.1g} %"


def duration(seconds: float) -> str:
    """A per-event time: ``19.2 µs``, ``184 µs``, ``1.4 ms``, ``11 ms``."""
    if seconds < 1e-3:
        micro = seconds * 1e6
        return f"{micro:.1f} µs" if micro < 100 else f"{micro:.0f} µs"
    milli = seconds * 1e3
    return f"{milli:.1f} ms" if milli < 10 else f"{milli:,.0f} ms"


def bold(text: str, condition: bool = True) -> str:
    """``**text**`` where ``condition`` holds (the page bolds a verdict)."""
    return f"**{text}**" if condition else text
