"""`python -m summarization_pydantic_ai.evals --help`."""

from ._cli import main

raise SystemExit(main())
