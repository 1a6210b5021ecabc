"""Plain-text tables for reports and command output: ``render_table(header, rows)``.

The first column is left-aligned, the others right-aligned (they hold numbers); columns are
separated by two spaces and the header by a rule of dashes. Pure; thread-safe.
"""

from __future__ import annotations

__all__ = ["render_table"]


def render_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table; the first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])
