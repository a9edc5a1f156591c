"""Ctrl-C for long-running scripts (``bench/*.py``, ``infra/serve.py``): exit 130 with one line, no traceback.

The CLI does the same in its root group (``ctxbench.cli.main._RootGroup``); this is the one helper for the scripts
that are not ``ctxbench`` commands.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

EXIT_INTERRUPTED = 130  # the shell's 128 + SIGINT (2)


def run_main(main: Callable[[], Any]) -> None:
    """Call ``main()`` and exit with its return value (an int, or 0); a KeyboardInterrupt (Ctrl-C, SIGINT) prints
    ``interrupted`` on stderr and exits 130 instead of a traceback. Never returns."""
    try:
        rv = main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(rv if isinstance(rv, int) else 0)
