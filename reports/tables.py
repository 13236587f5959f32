"""Numbers and Markdown tables as every report writes them: "-" for a missing value."""
import math


def fmt(v, spec):
    """v formatted with SPEC, or "-" where it is missing (None or NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def markdown_table(header, rows, align=None):
    """A Markdown table: HEADER (the column titles), ROWS (lists of cells, formatted already),
    ALIGN (per column "l", "r" or "c"; default left) as lines."""
    rule = {"l": "---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(rule[a] for a in (align or "l" * len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines
