"""a2sgd's reports: every table, figure and generated docs block, computed from the committed runs
under docs/results/ (docs/results/README.md maps each folder to its driver, report and blocks).

Run from the source root (or with it on PYTHONPATH):

    python3 -m reports STUDY [ARGS]     a study's report (python3 -m reports --help lists them)
    python3 -m reports docs ROOT --check OUTDIR | --write | --list

Shared by every report: runs (the one reader of metrics.jsonl and config.ini), targets (the one
target-crossing rule), tables (the number formatter and Markdown tables), plots (the matplotlib
set-up).
"""
