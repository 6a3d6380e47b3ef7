"""`python -m metalx`: the environment report (see metalx.env_report)."""

import sys

from metalx.env_report import main

sys.exit(main(sys.argv[1:]))
