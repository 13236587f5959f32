#!/usr/bin/env python3
"""docs/architecture.md against the tree: every tracked folder (the committed runs under
docs/results/ and the fuzz corpus's per-harness folders aside) has its line and every line names a
tracked folder; every header and source of a library component includes only the components its
line allows ("every component above": the rows before it); the reports package has no function
over 100 lines and edits no sys.path.

Usage: check_architecture.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

source = sys.argv[1]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


files = subprocess.run(["git", "-C", source, "ls-files"], capture_output=True, text=True).stdout.split()
if not files:  # not a git checkout (a source tarball): every file under the tree
    files = [os.path.relpath(os.path.join(d, f), source) for d, _, fs in os.walk(source) for f in fs
             if not os.path.relpath(d, source).startswith(("build", "."))]
folders = set()
for f in files:
    d = os.path.dirname(f)
    while d:  # the folder and every folder above it
        folders.add(d)
        d = os.path.dirname(d)
folders = {d for d in folders if d and not d.startswith("docs/results/") and not d.startswith("tests/fuzz/corpus/")}

text = open(os.path.join(source, "docs", "architecture.md")).read()
rows = re.findall(r"^\| `([^`]+)` \| ([^|]*) \|(?: ([^|]*) \|)?$", text, re.M)
listed = [r[0] for r in rows]
missing = sorted(folders - set(listed))
stale = sorted(set(listed) - folders)
check(not missing, f"every tracked folder has its line in docs/architecture.md (missing: {missing})")
check(not stale, f"every line names a tracked folder (not in the tree: {stale})")

# The library's include rules.
components, allowed = [], {}
for folder, _, rule in rows:
    m = re.fullmatch(r"src/a2sgd/([a-z]+)(/[a-z]+)?", folder)
    if not m:
        continue
    name = m.group(1)
    rule = (rule or "").strip()
    if rule == "nothing else of a2sgd":
        allow = set()
    elif rule == "every component above":
        allow = set(components)
    else:
        allow = {c.strip() for c in rule.split(",") if c.strip() and c.strip() != "-"}
    allowed[folder] = allow | {name}
    if m.group(2) is None and name not in components:
        components.append(name)
wrong = []
for folder, allow in allowed.items():
    for f in files:
        if os.path.dirname(f) != folder or not f.endswith((".hpp", ".cpp")):
            continue
        for inc in re.findall(r"#include <a2sgd/([a-z]+)/", open(os.path.join(source, f)).read()):
            if inc not in allow:
                wrong.append(f"{f} includes {inc}")
check(len(allowed) >= 8, f"the library's components have include rules ({len(allowed)} folders)")
check(not wrong, f"every component includes only what its line allows ({wrong[:5]})")
# The reports package stays readable: no function over 100 lines, and its modules import each
# other as a package (no sys.path edits).
import ast  # noqa: E402
long_functions, path_edits = [], []
for f in files:
    if f.startswith("reports/") and f.endswith(".py"):
        text = open(os.path.join(source, f)).read()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 100:
                long_functions.append(f"{f}: {node.name} ({node.end_lineno - node.lineno + 1} lines)")
        if "sys.path.insert" in text:
            path_edits.append(f)
check(not long_functions, f"no function of the reports package is over 100 lines ({long_functions[:5]})")
check(not path_edits, f"the reports package's modules edit no sys.path ({path_edits[:5]})")
print(f"{len(failures)} failed" if failures else "every check passed")
sys.exit(1 if failures else 0)
