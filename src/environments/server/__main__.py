"""`python -m environments.server`: see `environments.server.config.parse_args` for options."""

import sys

from environments.server.serve import main

sys.exit(main())
