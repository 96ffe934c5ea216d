"""A second family of seeded sessions: a data-analysis agent, written independently of the coding sessions.

Different tools (`run_sql`, `run_python`, `load_dataset`, `list_files`, `save_chart`, `write_report`, a Codex-style
`update_plan`), different phrasing and different failure shapes: a SQL error returned as ordinary tool text, a
Python traceback sent back as a retry prompt, a missing file reported as a failed call, a statement timeout. Choices
are stated mid-turn in several ways, findings sit anywhere in a turn's last answer (after a table, before a
question), some fixes are explained and some are silent retries. The session ends with a long latest request (a
pasted table of targets, longer than a summary would copy) with an attachment, then work on it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    DocumentUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from .._messages import MESSAGE_ID_KEY
from . import _analysis_text as text
from ._derive import derive_probes
from ._probes import Probe, todo_patterns
from ._session import MIN_MESSAGES, Session

__all__ = ["build_analysis_session"]

_TAIL_PAIRS = 12


def build_analysis_session(messages: int = 200, seed: int = 0) -> Session:
    """A data-analysis session of at least `messages` messages (a few more at most, ending with a request), with
    planted facts: findings and choices, errors and how they were fixed, charts and reports saved, the plan's
    step states and a long latest request with an attachment. Deterministic: the same arguments give the same
    session. Its probes are the planted facts plus the artifact trail read back from the messages."""
    if isinstance(messages, bool) or not isinstance(messages, int) or messages < MIN_MESSAGES:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"messages must be an int of at least {MIN_MESSAGES}, got {messages!r}")
    builder = _Analysis(random.Random(f"analysis-{seed}"), seed)
    builder.run(messages)
    probes = list({(p.category, p.expected): p for p in [*builder.probes, *derive_probes(builder.messages)]}.values())
    return Session(builder.messages, probes, seed, f"analysis seed {seed}, {len(builder.messages)} messages")


@dataclass
class _Analysis:
    rng: random.Random
    seed: int
    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    probes: list[Probe] = field(default_factory=list[Probe])
    plan: list[dict[str, str]] = field(default_factory=list[dict[str, str]])
    _used: set[str] = field(default_factory=set[str])
    _calls: int = 0
    _n: int = 0

    def run(self, target: int) -> None:
        task = f"I need {self._topic()} for 2024 from the warehouse, with a chart and a short report."
        self.messages.append(ModelRequest(parts=[SystemPromptPart(text.SYSTEM), UserPromptPart(task)]))
        self._update_plan(new=3)
        body_end = target - 2 - 2 * _TAIL_PAIRS
        while len(self.messages) < body_end:
            self._episode(tail=False)
        self._latest_request()
        tail_end = len(self.messages) + 2 * _TAIL_PAIRS
        while len(self.messages) < tail_end:
            self._episode(tail=True)
        for index, message in enumerate(self.messages):
            message.metadata = {MESSAGE_ID_KEY: f"a{self.seed}-m{index:05d}"}
        for step in self.plan:  # the plan as its last update left it
            content, status = step["step"], step["status"]
            question = f"What is the status of the plan step '{content}'?"
            self.probes.append(Probe("todo_state", question, f"{content}: {status}", todo_patterns(content, status)))

    # -- vocabulary ------------------------------------------------------------------------------------------------

    def _unique(self, make: Any) -> str:
        for _ in range(30):
            value = make()
            if value not in self._used:
                self._used.add(value)
                return value
        self._n += 1
        value = f"{make()} ({self._n})"
        self._used.add(value)
        return value

    def _topic(self) -> str:
        return self._unique(lambda: f"{self.rng.choice(text.METRICS)} by {self.rng.choice(text.DIMENSIONS)}")

    def _slug(self, topic: str) -> str:
        return "_".join("".join(c if c.isalnum() else " " for c in topic).split())

    # -- messages --------------------------------------------------------------------------------------------------

    def _respond(self, say: str, tool: str, args: dict[str, Any]) -> str:
        self._calls += 1
        call_id = f"tc_{self._calls:05d}"
        parts = [TextPart(say)] if say else []
        self.messages.append(ModelResponse(parts=[*parts, ToolCallPart(tool, args, call_id)]))
        return call_id

    def _call(self, say: str, tool: str, args: dict[str, Any], result: str, outcome: str = "success") -> None:
        call_id = self._respond(say, tool, args)
        part = ToolReturnPart(tool, result, call_id, outcome=outcome)  # pyright: ignore[reportArgumentType]
        self.messages.append(ModelRequest(parts=[part]))

    def _episode(self, *, tail: bool) -> None:
        weights = {
            "query": 5.0,
            "python": 3.0,
            "chart": 1.0,
            "report": 0.7,
            "choice": 1.0,
            "sql_error": 0.5,
            "py_error": 0.5,
            "missing_file": 0.3,
            "timeout": 0.2,
            "plan": 0.8,
            "turn": 1.0,
        }
        if tail:
            weights.update(plan=0.0, turn=0.0)
        kind = self.rng.choices(list(weights), list(weights.values()))[0]
        getattr(self, f"_{kind}")()

    def _query(self) -> None:
        table = self.rng.choice(text.DATASETS)
        columns = ["segment", "accounts", "revenue_usd", "orders"]
        query = f"SELECT segment, count(*), sum(revenue_usd), count(order_id) FROM {table} GROUP BY 1 ORDER BY 2 DESC"
        rows = text.sql_table(self.rng, columns, self.rng.randint(12, 30))
        self._call(self.rng.choice(text.NARRATION), "run_sql", {"query": query}, rows)

    def _python(self) -> None:
        frame = self.rng.choice(text.DATASETS)
        code = f'df = load("{frame}")\ndf = df[df.created_at >= "2024-01-01"]\nprint(df.describe())'
        self._call(self.rng.choice(text.NARRATION), "run_python", {"code": code}, text.python_stdout(self.rng, frame))

    def _chart(self) -> None:
        topic = self._topic()
        path = f"charts/{self._slug(topic)}.png"
        spec = {"kind": self.rng.choice(["line", "bar", "area"]), "x": "month", "y": topic}
        self._call(f"Plotting {topic}.", "save_chart", {"path": path, "title": topic.capitalize(), "spec": spec},
                   f"Saved chart to {path} (1200x800, {self.rng.randint(2, 9)} series).")  # fmt: skip
        self.probes.append(Probe("file_paths", f"Where was the chart of {topic} saved?", path))

    def _report(self) -> None:
        topic = self._topic()
        path = f"reports/{self._slug(topic)}.md"
        body = f"# {topic.capitalize()}\n\n" + "\n".join(f"- finding {i}: see the chart" for i in range(8))
        words = len(body.split())
        self._call(
            "Writing this up.",
            "write_report",
            {"path": path, "markdown": body},
            f"Report saved: {path} ({words} words).",
        )
        self.probes.append(Probe("file_paths", f"Which report covers {topic}?", path))

    def _choice(self) -> None:
        topic = self._topic()
        choice, alternative, reason = self.rng.choice(text.CHOICES)
        template, expected = self.rng.choice(text.CHOICE_PHRASINGS)
        values = {
            "choice": choice,
            "alternative": alternative,
            "reason": reason,
            "reason_cap": reason[0].upper() + reason[1:],
            "topic": topic,
            "observation": self.rng.choice(text.OBSERVATIONS),
        }
        say = template.format(**values)
        code = f'result = compute("{topic}", method="{choice}")\nprint(result.head(12))'
        self._call(say, "run_python", {"code": code}, text.python_stdout(self.rng, "value"))
        self.probes.append(Probe("decisions", f"What was chosen for {topic}?", expected.format(**values)))

    def _sql_error(self) -> None:
        table = self.rng.choice(text.DATASETS)
        wrong, right = self.rng.choice(text.COLUMN_RENAMES)
        wrong, right = self._unique(lambda: f"{wrong}_{table}"), f"{right}_{table}"
        query = f"SELECT {wrong}, count(*) FROM {table} GROUP BY 1"
        error = f'ERROR:  column "{wrong}" does not exist\nLINE 1: SELECT {wrong}, count(*) FROM {table} GROUP BY 1'
        hint = f'\n               ^\nHINT:  Perhaps you meant to reference the column "{table}.{right}".'
        self._call(self.rng.choice(text.NARRATION), "run_sql", {"query": query}, error + hint)
        fixed = f"SELECT {right}, count(*) FROM {table} GROUP BY 1"
        explain = self.rng.random() < 0.5
        say = f"The column is `{right}`, not `{wrong}`." if explain else ""
        self._call(say, "run_sql", {"query": fixed}, text.sql_table(self.rng, [right, "count"], 8))
        self.probes.append(
            Probe("errors", f"Which error did the query on {table} hit?", f'column "{wrong}" does not exist')
        )
        expected = f"`{right}`, not `{wrong}`" if explain else fixed
        self.probes.append(Probe("errors", f"How was the query selecting {wrong} fixed?", expected))

    def _py_error(self) -> None:
        self._n += 1
        column = self._unique(
            lambda: f"{self.rng.choice(['mrr', 'seats', 'discount', 'score'])}_{self.rng.randint(1, 99)}"
        )
        code = f'df["{column}_total"] = df.groupby("account")["{column}"].transform("sum")'
        call_id = self._respond(self.rng.choice(text.NARRATION), "run_python", {"code": code})
        trace = (
            f'Traceback (most recent call last):\n  File "<cell {self._n}>", line 1, in <module>\n'
            f"    {code}\nKeyError: '{column}'"
        )
        # A `ModelRetry` raised by the tool: the model is asked to try again.
        self.messages.append(ModelRequest(parts=[ToolReturnPart("run_python", trace, call_id, outcome="retried")]))
        right = f"{column}_usd"
        fixed = code.replace(f'["{column}"]', f'["{right}"]')
        silent = self.rng.random() < 0.4
        say = "" if silent else f"`{column}` was renamed to `{right}` in this export; using the new name."
        self._call(say, "run_python", {"code": fixed}, text.python_stdout(self.rng, right))
        self.probes.append(
            Probe("errors", f"Which exception did the groupby over {column} raise?", f"KeyError: '{column}'")
        )
        expected = right if silent else f"renamed to `{right}`"
        self.probes.append(Probe("errors", f"How was the KeyError on {column} fixed?", expected))

    def _missing_file(self) -> None:
        name = self._unique(
            lambda: f"{self.rng.choice(text.DATASETS)}_{self.rng.choice(['q1', 'q2', 'q3', 'h1', 'fy'])}"
        )
        path = f"data/{name}.parquet"
        error = f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'"
        self._call("Loading the extract.", "load_dataset", {"path": path}, error, outcome="failed")
        listing = "\n".join(f"data/{name}_{v}.parquet  {self.rng.randint(2, 90)} MB" for v in ("2024", "raw"))
        self._call("", "list_files", {"directory": "data"}, listing)
        found = f"data/{name}_2024.parquet"
        self._call(
            "", "load_dataset", {"path": found}, f"Loaded {found}: {self.rng.randint(9, 99) * 1000:,} rows x 14 columns"
        )
        self.probes.append(Probe("errors", f"Why did loading {path} fail?", f"No such file or directory: '{path}'"))
        self.probes.append(Probe("errors", f"Which file was loaded instead of {path}?", found))

    def _timeout(self) -> None:
        table = self.rng.choice(text.DATASETS)
        rollup = self._unique(lambda: f"{table}_daily_{self.rng.choice(['v2', 'v3', 'agg', 'mart'])}")
        query = f"SELECT date_trunc('day', created_at), count(*) FROM {table} GROUP BY 1"
        error = "ERROR:  canceling statement due to statement timeout"
        self._call(self.rng.choice(text.NARRATION), "run_sql", {"query": query}, error, outcome="failed")
        say = f"The full scan of {table} times out; reading from the {rollup} rollup instead."
        self._call(
            say,
            "run_sql",
            {"query": f"SELECT day, events FROM {rollup}"},
            text.sql_table(self.rng, ["day", "events"], 10),
        )
        self.probes.append(
            Probe("errors", f"How was the timeout on {table} worked around?", f"reading from the {rollup} rollup")
        )

    def _update_plan(self, new: int = 0) -> None:
        for step in self.plan:
            if step["status"] == "in_progress":
                step["status"] = "completed"
                break
        for _ in range(new or self.rng.randint(0, 2)):
            self.plan.append({"step": f"Analyse {self._topic()}", "status": "pending"})
        while len(self.plan) > 7 and self.plan[0]["status"] == "completed":
            self.plan.pop(0)
        waiting = [s for s in self.plan if s["status"] == "pending"]
        if waiting:
            waiting[0]["status"] = "in_progress"
        args = {"explanation": "Updating the plan.", "plan": [dict(s) for s in self.plan]}
        self._call("", "update_plan", args, "Plan updated")

    def _plan(self) -> None:
        self._update_plan()

    def _turn(self) -> None:
        topic = self._topic()
        metric = topic.split(" by ")[0]
        segment = self.rng.choice(["EMEA", "APAC", "Americas", "SMB", "enterprise"])
        finding = f"{metric} for the {segment} segment was {text.number(self.rng, 1, 60, '%')}"
        table = "\n".join(
            ["| segment | value |", "|---|---|"] + [f"| s{i} | {text.number(self.rng, 1, 60)} |" for i in range(4)]
        )
        answer = self.rng.choice(text.FINDING_PHRASINGS).format(
            finding=finding[0].upper() + finding[1:] if self.rng.random() < 0.5 else finding,
            context=self.rng.choice(text.CONTEXTS),
            chart=f"charts/{self._slug(topic)}.png",
            dimension=topic.split(" by ")[1],
            other=self.rng.choice(text.DIMENSIONS),
            table=table,
        )
        self.messages.append(ModelResponse(parts=[TextPart(answer)]))
        self.messages.append(
            ModelRequest(parts=[UserPromptPart(self.rng.choice(text.FOLLOW_UPS).format(ask=self._topic()))])
        )
        self.probes.append(Probe("decisions", f"What did the analysis find for {topic}?", finding))

    def _latest_request(self) -> None:
        self.messages.append(ModelResponse(parts=[TextPart("All done; the report is up to date.")]))
        rows = "\n".join(
            f"{region},{month},{text.number(self.rng, 10, 90)},{text.number(self.rng, 1, 9)}"
            for region in ("EMEA", "APAC", "Americas", "LATAM")
            for month in ("2025-01", "2025-02", "2025-03", "2025-04", "2025-05", "2025-06", "2025-07", "2025-08")
        )
        request = (
            f"Board deck ask (ref B-{self.seed}-{len(self.messages)}): compare our 2024 numbers with the targets "
            "below (pasted from the planning sheet) and flag every region and month that misses by more than 10%.\n\n"
            f"region,month,target_revenue_musd,target_churn_pct\n{rows}\n\n"
            "Use the same definitions as before, put one chart per region in charts/board/, and write the summary "
            "to reports/board_q4.md. The full deck is attached for context; do not change the earlier reports."
        )
        attachment = DocumentUrl(f"https://files.example.com/{self.seed}/board-deck-q4.pdf")
        self.messages.append(ModelRequest(parts=[UserPromptPart([request, attachment])]))
