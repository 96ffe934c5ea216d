"""`python -m pydantic_deep.cli`: the `pydantic-deep` command."""

import sys

from . import main

sys.exit(main())
