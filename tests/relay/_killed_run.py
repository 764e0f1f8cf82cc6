"""A relay run that kills itself with SIGKILL: ``python _killed_run.py RUNS SEED STEP DELAY_MS``.

After committing step ``STEP`` it sends itself SIGKILL, at once (``DELAY_MS`` 0)
or from a timer ``DELAY_MS`` later, which lands in the middle of a later step or
commit. The job is exactly :func:`relay_job` so a resume in another process is
of the same job.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from ctxwise.relay import FaultyStep, HandoverParser, Relay, generate

CHUNKS = 96


def relay_job(runs: Path, seed: int) -> Relay:
    """The job every process of the test builds: the counting log, a faulty step."""
    workload = generate(seed, variant="counting", chunks=CHUNKS)
    step = FaultyStep(HandoverParser(), rate=0.3, seed=seed)
    return Relay(workload, step, runs=runs)


def main() -> None:
    runs, seed, kill_step, delay_ms = Path(sys.argv[1]), *map(int, sys.argv[2:5])

    def kill() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def on_commit(step: int) -> None:
        if step != kill_step:
            return
        if delay_ms == 0:
            kill()
        threading.Timer(delay_ms / 1000, kill).start()

    relay_job(runs, seed).run("job", on_commit=on_commit)


if __name__ == "__main__":
    main()
