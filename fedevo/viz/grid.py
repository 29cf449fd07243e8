"""Rows of plotly subplot panels a fixed number of pixels high and apart, however many rows (front.html's
projections, compare.html's fronts, importance.html's bars): make_subplots' vertical_spacing is a fraction of the
figure, so a fixed fraction grew the gaps with the rows (16 %: 250 px around panels 200 px high at four rows)."""

from __future__ import annotations


def rows_of_three(n: int) -> tuple[int, int]:
    """(rows, columns) of n panels in rows of up to three (front.html's projections, compare.html's fronts)."""
    ncol = min(3, max(n, 1))
    return -(-n // ncol), ncol


def cell(i: int, ncol: int) -> tuple[int, int]:
    """make_subplots' (row, col), from 1, of panel i (from 1) in rows of ncol."""
    return (i - 1) // ncol + 1, (i - 1) % ncol + 1


def panel_rows(n_rows: int, panel_h: int, gap: int) -> tuple[int, float]:
    """(the plot area's height in px, make_subplots' vertical_spacing) of n_rows rows of panel_h px, gap px apart."""
    plot_h = n_rows * panel_h + (n_rows - 1) * gap
    return plot_h, (gap / plot_h if n_rows > 1 else 0.1)
