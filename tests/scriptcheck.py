"""What the Python checks of the project's scripts share: one line per assertion (ok or FAIL), and
an exit code that fails the test when any assertion did."""
import sys

failures = []


def check(cond, text):
    """Prints the assertion's outcome and records a failure; the check goes on, so that one run shows
    every broken property."""
    print(("ok   " if cond else "FAIL ") + text)
    if not cond:
        failures.append(text)


def finish():
    """Exits 1 if any check failed, else 0."""
    sys.exit(1 if failures else 0)


def executable(path, text):
    """Writes an executable file (a stand-in program), creating its folder."""
    import os
    import stat
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def standin_launcher(work, calls):
    """A stand-in for mpirun in WORK that appends "np=<ranks>" to CALLS and runs the program once;
    returns the environment that makes the study scripts use it."""
    import os
    path = os.path.join(work, "mpirun")
    executable(path, f"""#!/bin/sh
[ "$1" = -np ] || exit 9
echo "np=$2" >> {calls!r}
shift 2
exec "$@"
""")
    return dict(os.environ, MPIEXEC=path, MPIEXEC_FLAGS="")


def recorded_calls(calls):
    """The argument lists the stand-in a2sgd-train recorded in CALLS (the launcher's lines left out)."""
    import os
    if not os.path.exists(calls):
        return []
    return [line.split() for line in open(calls).read().splitlines() if not line.startswith("np=")]


def option(args, name):
    """The value after NAME in an argument list, or None."""
    return args[args.index(name) + 1] if name in args else None
