"""Allow `python -m runner_queue_fallback`."""

import sys

from runner_queue_fallback.cli import main

if __name__ == "__main__":
    sys.exit(main())
