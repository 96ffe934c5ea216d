"""The offline demo, as a script: the same as `pydantic-deep demo` (see docs/cli.md).

    python examples/demo.py [--dir DIR]

A scripted coding agent (a `FunctionModel`) goes through the real `create_deep_agent` stack with the deterministic
summarizer: eviction, compaction, memory and the history search, with no API key and no network.
"""

import sys

from pydantic_deep.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
