"""``python -m leap.cli ...`` is ``leap ...``."""

import sys

from leap.cli import main

sys.exit(main())
