"""``python -m leap ...`` is ``leap ...``."""

import sys

from leap.cli import main

sys.exit(main())
