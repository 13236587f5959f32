#!/usr/bin/env python3
"""The generated blocks of README.md and docs/*.md against the committed runs (reports/docs_blocks.py):

- the committed documents regenerate unchanged into the build tree (the check itself);
- the check can fail: in a copy of the documents, a figure edited by hand inside a block (a table of
  results.md and its opening table, the README's verdict), a block naming no generator and a block left open each
  make it exit 1, naming the document and the block; --write puts the regenerated figure back;
- the connections check's table (block network-links-check) counts made-up runs right: finished,
  stopped at the collective timeout (exit 76) and failed otherwise, per connection count and method.

Usage: check_docs_blocks.py SOURCE_DIR WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scriptcheck import check, finish  # noqa: E402

source, work = os.path.abspath(sys.argv[1]), sys.argv[2]
# python3 -m reports docs: the package at the source root, whichever tree it checks.
os.environ["PYTHONPATH"] = source + os.pathsep + os.environ.get("PYTHONPATH", "")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(root, *args):
    return subprocess.run([sys.executable, "-m", "reports", "docs", root, *args], capture_output=True, text=True)


try:
    import matplotlib  # noqa: F401
    plots = ["--plots"]
except ImportError:
    plots = []
    print(f"note: no matplotlib for {sys.executable}: the plots are not redrawn")
r = run(source, "--check", os.path.join(work, "regenerated"), *plots)
print(r.stdout[-3000:])
check(r.returncode == 0, "the committed documents' generated blocks match the committed data"
      + (" and their plots redraw" if plots else ""))
if plots:
    check(os.path.isfile(os.path.join(work, "regenerated", "docs", "results", "lr-sweep", "lstm_p2_sgd.png")),
          "the sweep's plots redrawn into the build tree")
check(os.path.isfile(os.path.join(work, "regenerated", "docs", "results.md")), "regenerated documents in the build tree")

# A copy of the documents, with the data linked in.
copy = os.path.join(work, "copy")
os.makedirs(os.path.join(copy, "docs"))
shutil.copy(os.path.join(source, "README.md"), copy)
for f in os.listdir(os.path.join(source, "docs")):
    if f.endswith(".md"):
        shutil.copy(os.path.join(source, "docs", f), os.path.join(copy, "docs"))
os.symlink(os.path.join(source, "docs", "results"), os.path.join(copy, "docs", "results"))
results = os.path.join(copy, "docs", "results.md")
text = open(results).read()
begin = text.index("<!-- generated: paper-steps -->")
row = text.index("| SGD: steps to", begin)
end = text.index("\n", row)
edited = text[row:end].replace(" | ", " | 9", 1)
check(edited != text[row:end], "a figure to edit in block paper-steps")
with open(results, "w") as fh:
    fh.write(text[:row] + edited + text[end:])
r = run(copy, "--check", os.path.join(work, "regenerated-copy"))
check(r.returncode == 1, f"a hand-edited figure fails the check (exit {r.returncode})")
check("docs/results.md: block 'paper-steps'" in r.stdout, "the failure names the document and the block")
check("+| SGD: steps to" in r.stdout and "-| SGD: steps to" in r.stdout, "with a diff of the row")
r = run(copy, "--write")
check(r.returncode == 0 and open(results).read() == text, "--write restores the regenerated block")

headline_text = open(results).read()
row = headline_text.index("| LSTM on Penn Treebank, 2 ranks, SGD", headline_text.index("<!-- generated: results-headline -->"))
cell = headline_text.index("with the defaults", row)
with open(results, "w") as fh:
    fh.write(headline_text[:cell - 2] + "1" + headline_text[cell - 1:])  # the steps' last digit
r = run(copy, "--check", os.path.join(work, "regenerated-copy"))
check(r.returncode == 1 and "docs/results.md: block 'results-headline'" in r.stdout,
      f"a hand-edited figure of the results' opening table fails, naming its block (exit {r.returncode})")
readme = os.path.join(copy, "README.md")
readme_text = open(readme).read()
verdict = readme_text.index("<!-- generated: readme-verdict -->")
figure = re.search(r"\d\.\dx \(SGD\)", readme_text[verdict:])
check(figure is not None, "a figure to edit in the README's verdict")
at = verdict + figure.start()
with open(readme, "w") as fh:
    fh.write(readme_text[:at] + ("9" if readme_text[at] != "9" else "8") + readme_text[at + 1:])
r = run(copy, "--check", os.path.join(work, "regenerated-copy"))
check(r.returncode == 1 and "README.md: block 'readme-verdict'" in r.stdout,
      f"a hand-edited figure of the README's verdict fails, naming its block (exit {r.returncode})")
with open(readme, "w") as fh:
    fh.write(readme_text)

with open(results, "w") as fh:
    fh.write(text + "\n<!-- generated: no-such-table -->\n<!-- end generated: no-such-table -->\n")
r = run(copy, "--check", os.path.join(work, "regenerated-copy"))
check(r.returncode == 1 and "no-such-table' names no generator" in r.stdout, "a block naming no generator fails")
with open(results, "w") as fh:
    fh.write(text.replace("<!-- end generated: paper-steps -->\n", ""))
r = run(copy, "--check", os.path.join(work, "regenerated-copy"))
check(r.returncode == 1 and "'paper-steps' is not closed" in r.stdout, "a block left open fails")
if plots:
    with open(results, "w") as fh:
        fh.write(text + "\n![made by hand](results/paper/ppl_sgd_1gbps.png)\n")
    r = run(copy, "--check", os.path.join(work, "regenerated-copy"), *plots)
    check(r.returncode == 1 and "shows docs/results/paper/ppl_sgd_1gbps.png" in r.stdout,
          "a plot a document shows that its data does not redraw fails")

# block network-links-check on made-up runs (scripts/studies/cluster/links_check.sh's runs.csv)
sys.path.insert(0, source)
from reports import network_model_report  # noqa: E402
fake = os.path.join(work, "fake")
os.makedirs(os.path.join(fake, network_model_report.LINKS_CHECK))
with open(os.path.join(fake, network_model_report.LINKS_CHECK, "runs.csv"), "w") as fh:
    fh.write("round,links,method,exit,seconds\n1,1,fp16,0,30.0\n1,2,fp16,76,67.0\n2,1,fp16,0,28.0\n"
             "2,2,fp16,124,900.0\n3,1,fp16,0,29.0\n3,2,fp16,0,27.5\n1,2,bf16,76,66.0\n")
table = network_model_report.network_links_check(fake)
check("| 1 | fp16 | 3 | 3 | 0 | 0 | 29.0 |" in table, "1 connection: 3 runs, all finished, median 29.0 s")
check("| 2 | fp16 | 3 | 1 | 1 | 1 | 27.5 |" in table, "2 connections: one finished, one stopped (76), one failed otherwise")
check("| 2 | bf16 | 1 | 0 | 1 | 0 | - |" in table, "no finished run: no median")
finish()
