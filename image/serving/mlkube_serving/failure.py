"""One line that says what went wrong and what to fix, where a user reads it: stderr, and the
file Kubernetes reads a container's termination message from (its terminationMessagePath,
/dev/termination-log unless the pod says otherwise; $MLKUBE_TERMINATION_LOG names another), so
that the container's terminated state, and `mlkube status`, show it.

This module is never reloaded (MLServer reloads a runtime's module when it loads a model), so
what `record` keeps here outlives the runtime that recorded it.
"""

import os
import sys

TERMINATION_LOG = "/dev/termination-log"

# The line a runtime recorded when its model failed to load, for `serve` to exit with.
recorded = None


def termination_log():
    return os.environ.get("MLKUBE_TERMINATION_LOG") or TERMINATION_LOG


def record(line):
    """Keeps LINE, prints it on stderr and writes it as the termination message: only into a
    file that is there and writable, as a pod's is (outside one, /dev holds no such file)."""
    global recorded
    recorded = line
    print(f"error: {line}", file=sys.stderr, flush=True)
    path = termination_log()
    if os.path.isfile(path) and os.access(path, os.W_OK):
        try:
            with open(path, "w") as log:
                log.write(line + "\n")
        except OSError:
            pass


def cause(error):
    """An exception's message as a clause of a line: its first line, without a final stop
    (XGBoost's and TensorFlow's errors carry stack traces and end in one)."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    return lines[0].rstrip(" .") or type(error).__name__


def fail(line):
    """Records LINE and ends the process with exit status 1."""
    record(line)
    sys.exit(1)
