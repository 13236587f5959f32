#!/usr/bin/env bash
# `pip install` of the Python package (pyproject.toml, setup.py: the project's CMake with
# -DA2SGD_PYTHON=ON) offline, as docs/pytorch.md says: into a fresh venv that sees the system's
# setuptools, pybind11 (CMake config) and torch, with --no-build-isolation and no package index.
# Then, from another directory, a2sgd.torch imports from the venv and a 2-rank DDP step over gloo
# with a2sgd's hook hands all_reduce 16 bytes.
# Usage: check_pip_install.sh SOURCE_DIR WORK_DIR PYTHON
set -u
src=$1 work=$2 python=$3
"$python" -c "import torch" 2> /dev/null || { echo "SKIPPED: $python has no torch"; exit 0; }
"$python" -c "import venv, ensurepip" 2> /dev/null || { echo "SKIPPED: no venv/ensurepip (python3-venv)"; exit 0; }
rm -rf "$work" && mkdir -p "$work" || exit 1
"$python" -m venv --system-site-packages "$work/venv" || { echo "FAIL: python3 -m venv"; exit 1; }
# A copy of the tracked tree, as pip builds in place: the source tree's own build folders stay out of
# it; links (results linked from another study) stay links.
mkdir -p "$work/src" && (cd "$src" && git ls-files -z 2> /dev/null | xargs -0 cp -P --parents -t "$work/src" 2> /dev/null) ||
  (cd "$src" && tar --exclude='./build*' --exclude='./_build' -cf - .) | (cd "$work/src" && tar -xf -)
[[ -f $work/src/pyproject.toml ]] || { echo "FAIL: no pyproject.toml in the copy"; exit 1; }
if ! CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} "$work/venv/bin/python" -m pip install --no-build-isolation \
    --no-index "$work/src" > "$work/pip.log" 2>&1; then
  tail -n 40 "$work/pip.log"
  echo "FAIL: pip install --no-build-isolation --no-index"
  exit 1
fi
cd "$work" || exit 1
# A file, not standard input: torch's spawn starts the workers from the main module's file.
cat > "$work/step.py" <<'PY'
import os, sys, tempfile
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import a2sgd.torch as at

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(os.path.dirname(at.__file__))
assert where.startswith(venv), f"a2sgd imported from {where}, not the venv {venv}"


def step(rank, init, out):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    torch.manual_seed(1)
    net = torch.nn.Linear(20, 3)
    model = torch.nn.parallel.DistributedDataParallel(net)
    state = at.A2SGDState(module=net)
    model.register_comm_hook(state, at.a2sgd_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 20, generator=torch.Generator().manual_seed(rank))
    before = net.weight.detach().clone()
    model(x).square().mean().backward()
    opt.step()
    moved = not torch.equal(before, net.weight.detach())
    if rank == 0:
        torch.save({"bytes": state.bytes_last_step, "moved": moved}, out)
    # DDP goes before its process group: torch 1.13 can hang freeing a DDP whose gloo group was
    # destroyed (one run in four here).
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    init, out = f"file://{tempfile.mkdtemp()}/rdv", os.path.join(tempfile.mkdtemp(), "r.pt")
    mp.spawn(step, args=(init, out), nprocs=2, join=True)
    r = torch.load(out)
    assert r["moved"] and r["bytes"] == 16, r
    print(f"pip-installed a2sgd.torch from {where}: a 2-rank DDP step with a2sgd_hook, 16 bytes to all_reduce")
PY
GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 timeout 300 "$work/venv/bin/python" "$work/step.py" "$work/venv"
