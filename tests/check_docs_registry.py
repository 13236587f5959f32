#!/usr/bin/env python3
"""The docs against the registries: every method a2sgd-train lists (--list-methods) has a row in
docs/methods.md's table of methods (the one list of methods in the docs; README points to it); every option of a
method (--<method>-<option>, from a2sgd-train --help) is in docs/training.md's options table; every
model (--list-models) is named in docs/training.md. Usage: check_docs_registry.py SOURCE_DIR A2SGD_TRAIN
"""
import os
import re
import subprocess
import sys

source, train = sys.argv[1], sys.argv[2]
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(*args):
    return subprocess.run([train, *args], capture_output=True, text=True, env=env, check=True).stdout


methods = [line.split("\t")[0] for line in run("--list-methods").splitlines() if line.strip()]
models = [line.split("\t")[0] for line in run("--list-models").splitlines() if line.strip()]
options = sorted(set(re.findall(r"--((?:%s)-[a-z0-9-]+)" % "|".join(map(re.escape, methods)), run("--help"))))
read = lambda name: open(os.path.join(source, name)).read()
methods_md, training_md = read("docs/methods.md"), read("docs/training.md")
failures = []
for m in methods:
    if not re.search(r"^\|\s*`?%s`?\s*\|" % re.escape(m), methods_md, re.M):
        failures.append(f"docs/methods.md has no table row for method '{m}'")
for o in options:
    if f"`--{o}" not in training_md:
        failures.append(f"docs/training.md does not list option --{o}")
# The averaging policy's options (every method's; the help's "Periodic averaging" group).
help_text = run("--help")
group = help_text[help_text.index("Periodic averaging"):]
group = group[:group.index("\n\n")]
averaging = sorted(set(re.findall(r"^\s+--([a-z0-9-]+)", group, re.M)))
if len(averaging) < 5:
    failures.append(f"a2sgd-train --help lists {len(averaging)} averaging options, expected 5")
for o in averaging:
    if f"`--{o}" not in training_md:
        failures.append(f"docs/training.md does not list the averaging option --{o}")
for m in models:
    if f"`{m}`" not in training_md and f"--model {m}" not in training_md:
        failures.append(f"docs/training.md does not name model '{m}'")
for f in failures:
    print("FAIL:", f)
print(f"{len(methods)} methods, {len(options)} method options, {len(averaging)} averaging options, "
      f"{len(models)} models checked against the docs")
sys.exit(1 if failures else 0)
