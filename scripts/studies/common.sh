# The set-up every study driver shares, sourced right after its `set` line:
#   source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# here: this folder (the drivers and training_runs.sh); root: the source tree; the reports package
# (python3 -m reports) on PYTHONPATH; python: the interpreter that runs it (PYTHON, or Debian's, which
# has matplotlib); die MESSAGE: the driver's name and MESSAGE on stderr, exit status 2.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
python=${PYTHON:-/usr/bin/python3}
die() { echo "$(basename "$0"): error: $*" >&2; exit 2; }
