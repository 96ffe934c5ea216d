"""pydantic_deep: the harness on top of the context engine (backends, file tools, memory, sessions, CLI).

Built in later issues; it imports `summarization_pydantic_ai`, never the reverse.
"""

__all__: list[str] = []
