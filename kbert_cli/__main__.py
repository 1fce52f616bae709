"""`python -m kbert_cli`: the `kbert` command."""

import sys

from kbert_cli import main

sys.exit(main())
