"""What the synthetic data-analysis session says and what its tools return: vocabularies, phrasings and outputs.

Kept apart from the session builder (`_analysis.py`) so the builder reads as the shape of a session. Every
function is deterministic for a given `random.Random`.
"""

from __future__ import annotations

import random

__all__ = [
    "CHOICE_PHRASINGS",
    "COLUMN_RENAMES",
    "DATASETS",
    "DIMENSIONS",
    "FINDING_PHRASINGS",
    "FOLLOW_UPS",
    "METRICS",
    "NARRATION",
    "OBSERVATIONS",
    "SYSTEM",
    "number",
    "python_stdout",
    "sql_table",
]

SYSTEM = (
    "You are a data analyst. Query the warehouse with run_sql, explore data in a Python sandbox with run_python, "
    "save charts with save_chart and write findings under reports/. Keep your plan current with update_plan."
)
DATASETS = ("orders", "subscriptions", "invoices", "tickets", "sessions", "refunds", "leads", "events")
METRICS = (
    "churn",
    "refund rate",
    "deal size",
    "activation",
    "net revenue retention",
    "ticket backlog",
    "trial conversion",
    "average order value",
    "weekly active accounts",
    "time to first response",
)
DIMENSIONS = ("region", "plan tier", "acquisition channel", "signup cohort", "country", "device", "industry")
COLUMN_RENAMES = (
    ("order_dt", "order_date"),
    ("rev", "revenue_usd"),
    ("cust_id", "customer_id"),
    ("plan", "plan_tier"),
    ("created", "created_at"),
    ("amt", "amount_cents"),
    ("region_code", "sales_region"),
    ("status_cd", "status"),
)

# A choice stated in the middle of a turn, before the next tool call: (template, probe expectation template).
# {choice} and {topic} are always filled; {alternative}, {reason} and {observation} are context.
CHOICE_PHRASINGS = (
    ("{observation} I'll use {choice} for {topic}, since {reason}.", "{choice} for {topic}"),
    ("Going with {choice} for {topic} — {reason}.", "{choice} for {topic}"),
    ("{observation} So for {topic} I'm switching to {choice}.", "for {topic} I'm switching to {choice}"),
    ("Decision for {topic}: {choice}. {reason_cap}.", "decision for {topic}: {choice}"),
    ("For {topic}, {choice} makes more sense than {alternative}: {reason}.", "for {topic}, {choice}"),
    ("{observation} We should settle on {choice} for {topic}.", "{choice} for {topic}"),
    ("I've decided to go with {choice} for {topic} rather than {alternative}.", "{choice} for {topic}"),
)
CHOICES = (
    ("the median", "the mean", "a few enterprise deals dominate the average"),
    ("a 90-day inactivity window", "a 30-day window", "billing retries run for two months"),
    ("a left join on customer_id", "an inner join", "accounts without orders must stay in the base"),
    ("weekly buckets", "daily buckets", "daily counts are too noisy to read"),
    ("a log scale on the y-axis", "a linear axis", "values span four orders of magnitude"),
    ("UTC calendar days", "local time", "the warehouse stores UTC timestamps"),
    ("list prices before discounts", "net prices", "discount codes were applied inconsistently"),
    ("the first paid invoice as the start date", "the signup date", "trials distort tenure"),
    ("a 7-day rolling average", "raw daily values", "weekends halve the volume"),
    ("winsorized values at the 99th percentile", "raw values", "three test accounts have absurd totals"),
    ("cohorts by signup month", "cohorts by signup week", "weekly cohorts are too small"),
    ("excluding internal test accounts", "keeping every account", "QA accounts inflate activity"),
)
OBSERVATIONS = (
    "The distribution is heavily right-skewed (p99 is 40x the median).",
    "About 6% of rows have a null in this column.",
    "The numbers move a lot from one day to the next.",
    "Two of the segments have fewer than 50 accounts.",
    "The raw export mixes currencies.",
    "Looking at the sample, timestamps carry no timezone.",
)
# The last answer of a turn: a finding somewhere in it (not always first). {finding} is the probe expectation.
FINDING_PHRASINGS = (
    "{finding}. {context} The chart is saved as {chart}.",
    "Short version: {finding}. {context}",
    "I've finished this part. {context} Overall, {finding}, which is the number to watch.",
    "Here is the breakdown by {dimension}:\n\n{table}\n\n{finding}.",
    "Done. {context} Bottom line: {finding}. Should I also split it by {other}?",
)
CONTEXTS = (
    "The sample covers every account active in 2024.",
    "I left out the accounts created in the last two weeks.",
    "The trend is stable across the last three quarters.",
    "Smaller segments are noisy, so read them with care.",
    "The warehouse was refreshed this morning, so the numbers are current.",
)
FOLLOW_UPS = (
    "Thanks! Next: {ask}.",
    "Great. Can you now look at {ask}?",
    "ok — {ask} next please",
    "Nice work. Now do {ask}, same method.",
    "Perfect, that matches what finance saw. Could you dig into {ask}?",
)
NARRATION = (
    "Let me look at a sample first.",
    "Checking the schema.",
    "Pulling the numbers for this step.",
    "",
    "Next I'll aggregate by month.",
    "Let me verify the row counts.",
)


def number(rng: random.Random, low: float, high: float, suffix: str = "") -> str:
    """A value with two decimals, as an analysis reports it."""
    return f"{rng.uniform(low, high):.2f}{suffix}"


def sql_table(rng: random.Random, columns: list[str], rows: int) -> str:
    """A psql-style result table."""
    widths = [max(len(c), 12) for c in columns]
    lines = [" | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    for _ in range(rows):
        cells = [f"{rng.randint(0, 99_999):,}" if i else rng.choice(DATASETS) for i in range(len(columns))]
        lines.append(" | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
    lines.append(f"({rows} rows)")
    return "\n".join(lines)


def python_stdout(rng: random.Random, name: str) -> str:
    """What `df.describe()` prints in a sandbox."""
    stats = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")
    header = f"{'':>8}{name:>16}{'seats':>12}{'tenure_days':>14}"
    rows = [
        f"{s:>8}{rng.uniform(0, 9e4):>16.2f}{rng.uniform(1, 400):>12.1f}{rng.uniform(1, 900):>14.1f}" for s in stats
    ]
    return "\n".join([header, *rows])
