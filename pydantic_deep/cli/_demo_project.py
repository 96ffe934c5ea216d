"""The demo's small project: an inventory service whose checkout leaks pool connections, with a vendored tree large
enough that a search over it is evicted, and a test log that is too."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ERROR_LINE", "MARKER", "PROJECT_FILES", "failing_test_log", "passing_test_log", "write_project"]

MARKER = ".pydantic-deep-demo"
ERROR_LINE = "E   inventory.pool.PoolExhausted: connection pool exhausted (size=10, in_use=10, waited 5.0s)"

POOL = '''"""A fixed-size pool of database connections."""

import threading


class PoolExhausted(RuntimeError):
    pass


class ConnectionPool:
    def __init__(self, connect, size=10, timeout=5.0):
        self._connect = connect
        self._free = [connect() for _ in range(size)]
        self._lock = threading.Condition()
        self.size = size
        self.timeout = timeout
        self.in_use = 0

    def acquire(self):
        with self._lock:
            if not self._lock.wait_for(lambda: self._free, timeout=self.timeout):
                raise PoolExhausted(
                    f"connection pool exhausted (size={self.size}, in_use={self.in_use}, waited {self.timeout}s)"
                )
            self.in_use += 1
            return self._free.pop()

    def release(self, conn):
        with self._lock:
            self._free.append(conn)
            self.in_use -= 1
            self._lock.notify()
'''

CHECKOUT = '''"""Checkout: reserve stock and record the order in one transaction."""

from .pool import ConnectionPool


class EmptyOrder(ValueError):
    pass


def checkout(pool: ConnectionPool, order) -> int:
    conn = pool.acquire()
    if not order.items:
        raise EmptyOrder(order.id)
    with conn.transaction():
        for item in order.items:
            conn.execute("UPDATE stock SET qty = qty - ? WHERE sku = ?", (item.qty, item.sku))
        order_id = conn.execute("INSERT INTO orders (customer) VALUES (?)", (order.customer,)).lastrowid
    pool.release(conn)
    return order_id
'''

METRICS = '''"""Metrics exported at /metrics."""

COUNTERS = {"orders_total": 0, "checkout_errors_total": 0}


def render() -> str:
    return "\\n".join(f"{name} {value}" for name, value in COUNTERS.items())
'''

README = """# inventory

Stock and orders for the shop. Run the tests with `python -m pytest -q`.

## Metrics

`/metrics` exports `orders_total` and `checkout_errors_total`.
"""

TESTS = """from inventory.checkout import checkout


def test_checkout_records_order(pool, order):
    assert checkout(pool, order) > 0
"""

PROJECT_FILES = {
    "README.md": README,
    "src/inventory/__init__.py": "",
    "src/inventory/pool.py": POOL,
    "src/inventory/checkout.py": CHECKOUT,
    "src/inventory/metrics.py": METRICS,
    "tests/test_checkout.py": TESTS,
}


def _vendored(index: int) -> str:
    """A vendored driver module with many `acquire(` lines: the search over it is large."""
    lines = [f'"""vendor/dbdriver/mod_{index:02d}.py: generated bindings."""', ""]
    for i in range(12):
        lines += [
            f"def op_{index}_{i}(pool, *args):",
            f"    conn = pool.acquire()  # op {index}.{i}",
            "    try:",
            f"        return conn.call('op_{index}_{i}', *args)",
            "    finally:",
            "        pool.release(conn)",
            "",
        ]
    return "\n".join(lines)


def write_project(root: Path) -> None:
    """Write the project under `root` (made if missing), with a marker saying the demo owns it."""
    for name, text in PROJECT_FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for index in range(24):
        path = root / "vendor" / "dbdriver" / f"mod_{index:02d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_vendored(index), encoding="utf-8")
    (root / MARKER).write_text("written by pydantic-deep demo\n", encoding="utf-8")


def failing_test_log() -> str:
    """A long pytest log (about 12,000 tokens) with one failure deep inside."""
    lines = ["============================= test session starts =============================="]
    lines += ["platform linux -- Python 3.12.3, pytest-8.3.2", "collected 412 items", ""]
    for i in range(400):
        lines.append(f"tests/test_catalog.py::test_sku_roundtrip[sku-{i:04d}] PASSED{' ' * 20}[{i * 100 // 412:3d}%]")
        if i == 287:
            lines += [
                "tests/test_checkout.py::test_checkout_empty_then_full FAILED",
                "",
                "    def test_checkout_empty_then_full(pool, empty_order, order):",
                "        for _ in range(10):",
                "            with pytest.raises(EmptyOrder):",
                "                checkout(pool, empty_order)",
                ">       checkout(pool, order)",
                "",
                "src/inventory/checkout.py:11: in checkout",
                "    conn = pool.acquire()",
                ERROR_LINE,
            ]
    lines += ["", "=========================== short test summary info ============================"]
    lines += ["FAILED tests/test_checkout.py::test_checkout_empty_then_full - PoolExhausted", "1 failed, 411 passed"]
    return "\n".join(lines)


def passing_test_log(path: str) -> str:
    return f"{path} ..                                                  [100%]\n2 passed in 0.41s"
