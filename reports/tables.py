"""Numbers and Markdown tables as every report writes them: "-" for a missing value."""
import json
import math
import os


def fmt(v, spec):
    """v formatted with SPEC, or "-" where it is missing (None or NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def table_head(titles, align=None):
    """The two lines that open a Markdown table: the column TITLES and the rule under them (ALIGN: per
    column "l", "r" or "c"; default left)."""
    rule = {"l": "---", "r": "---:", "c": ":---:"}
    titles = list(titles)
    cells = "|".join(f" {t} " if t else " " for t in titles)  # an empty title as "| |", GitHub's own spelling
    return ["|" + cells + "|", "|" + "|".join(rule[a] for a in (align or "l" * len(titles))) + "|"]


def markdown_table(header, rows, align=None):
    """A Markdown table: HEADER (the column titles), ROWS (lists of cells, formatted already),
    ALIGN (per column "l", "r" or "c"; default left) as lines."""
    lines = table_head(header, align)
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def write_report(directory, name, lines, data):
    """DIRECTORY/NAME.md (the Markdown LINES) and DIRECTORY/NAME.json (DATA, indented), then the
    Markdown on standard output: what every study's report leaves next to its runs."""
    with open(os.path.join(directory, name + ".json"), "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(directory, name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
