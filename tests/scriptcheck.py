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
