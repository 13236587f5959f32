#!/usr/bin/env bash
# The Python package installed under a prefix (cmake --install, no pip) imports from there alone:
# a2sgd.torch and its compiled module, with the hook and state the docs name.
# Usage: check_install.sh BUILD_DIR WORK_DIR PYTHON SITE_PACKAGES_RELATIVE_TO_PREFIX
set -u
build=$1 work=$2 python=$3 site=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
[[ -f $work/prefix/$site/a2sgd/torch.py ]] || { echo "FAIL: no $site/a2sgd/torch.py under the prefix"; exit 1; }
cd "$work" || exit 1
PYTHONPATH="$work/prefix/$site" "$python" - "$work/prefix/$site" <<'PY'
import os, sys
try:
    import torch  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: no torch ({e})")
    sys.exit(0)
import a2sgd.torch as at
prefix = sys.argv[1]
where = os.path.dirname(os.path.abspath(at.__file__))
assert where == os.path.abspath(os.path.join(prefix, "a2sgd")), f"imported from {where}, not the prefix"
assert callable(at.a2sgd_hook) and at.A2SGDState().granularity == "model"
assert "a2sgd" in at.available_methods()
print(f"a2sgd.torch imports from {where}")
PY
