"""``python -m broker ...`` is ``sluice ...``."""

import sys

from broker.cli import main

sys.exit(main())
