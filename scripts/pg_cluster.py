"""A throwaway PostgreSQL cluster in a temporary directory, for the tests and the benchmarks.

    python scripts/pg_cluster.py                  # start one, print its DSN, remove it on Enter / Ctrl-C / EOF
    python scripts/pg_cluster.py -- pytest -q     # run a command with SPA_TEST_POSTGRES_DSN set, then remove it

The server binaries come from the Debian package `postgresql` (`/usr/lib/postgresql/<version>/bin`), from `PATH`,
or from `PG_BINDIR`. The cluster lives in a fresh temporary directory: `initdb` (trust authentication, UTF-8),
`pg_ctl start` on a free loopback port (and a Unix socket in the same directory), nothing else on the machine is
touched. `initdb` refuses to run as root: as root the cluster is owned by, and runs as, the `postgres` user (or
`nobody`). Stopping (`pg_ctl stop -m immediate`) removes the whole directory; a watchdog process does the same
when the owner dies without stopping it (killed, or a test run interrupted before its teardown).

By default the cluster trades durability for speed (`fsync=off`): it holds test data only. `durable=True` keeps
PostgreSQL's defaults, for benchmark figures a production server would see.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DSN_ENV", "ClusterError", "ThrowawayCluster", "find_bindir", "throwaway_cluster"]

DSN_ENV = "SPA_TEST_POSTGRES_DSN"
"""The environment variable that carries the DSN to the tests (set it to use a server you started yourself)."""

_FAST = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


_WATCHDOG = """
import os, shutil, subprocess, sys, time
owner, pg_ctl, directory = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while os.path.isdir(directory):
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        data = os.path.join(directory, "data")
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            stat = os.stat(data)
            def drop():
                if os.geteuid() == 0:
                    os.setgid(stat.st_gid)
                    os.setuid(stat.st_uid)
            subprocess.run([pg_ctl, "stop", "-m", "immediate", "-D", data], capture_output=True, preexec_fn=drop)
        shutil.rmtree(directory, ignore_errors=True)
        break
    time.sleep(1)
"""


class ClusterError(RuntimeError):
    """No throwaway cluster could be created or started (the message says why and what to install)."""


def find_bindir() -> Path:
    """The directory holding `initdb`, `pg_ctl` and `postgres`: `PG_BINDIR`, `PATH`, then the newest
    `/usr/lib/postgresql/<version>/bin` (Debian, Ubuntu) or `/usr/pgsql-<version>/bin` (RPM)."""
    candidates: list[Path] = []
    if os.environ.get("PG_BINDIR"):
        candidates.append(Path(os.environ["PG_BINDIR"]))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    versioned = [*Path("/usr/lib/postgresql").glob("*/bin"), *Path("/usr").glob("pgsql-*/bin")]
    candidates += sorted(versioned, key=_version_of, reverse=True)
    for directory in candidates:
        if all((directory / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return directory
    raise ClusterError(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found in PG_BINDIR, PATH, /usr/lib/postgresql/*/bin "
        "or /usr/pgsql-*/bin; install them (Debian/Ubuntu: apt-get install postgresql)"
    )


def _version_of(bindir: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", bindir.parent.name)) or (0,)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _utf8_locale() -> str:
    """A UTF-8 locale for the cluster's character classes (pg_trgm and the text-search parser then see CJK and
    accented letters as letters); `C` when the machine has none."""
    try:
        available = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False).stdout.split()
    except OSError:
        return "C"
    for name in ("C.UTF-8", "C.utf8", "en_US.UTF-8", "en_US.utf8"):
        if name in available:
            return name
    return "C"


@dataclass
class ThrowawayCluster:
    """One PostgreSQL cluster in a temporary directory; `start()` returns its DSN, `stop()` removes it all."""

    durable: bool = False
    max_connections: int = 200
    settings: Sequence[str] = ()
    """Extra `name=value` server settings (passed as `-c name=value`)."""
    bindir: Path | None = None
    directory: Path | None = field(default=None, init=False)
    port: int | None = field(default=None, init=False)
    _user: str | None = field(default=None, init=False)

    @property
    def dsn(self) -> str:
        if self.port is None:
            raise ClusterError("the cluster is not running")
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> str:
        bindir = self.bindir or find_bindir()
        # As root the server runs as another user, who must reach the directory: /tmp, whatever TMPDIR says.
        self.directory = Path(tempfile.mkdtemp(prefix="pg-throwaway-", dir="/tmp" if os.geteuid() == 0 else None))
        try:
            self._user = _unprivileged_user() if os.geteuid() == 0 else None
            if self._user is not None:
                shutil.chown(self.directory, user=self._user)
            self._run([str(bindir / "initdb"), *self._initdb_args()], "initdb")
            for attempt in range(3):  # another process may take the free port between probe and bind
                self.port = _free_port()
                try:
                    self._run([str(bindir / "pg_ctl"), *self._start_args()], "pg_ctl start")
                    self._watch(bindir)
                    return self.dsn
                except ClusterError:
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")
        except BaseException:
            self._remove()
            raise

    def _initdb_args(self) -> list[str]:
        assert self.directory is not None
        return [
            "-D",
            str(self.directory / "data"),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            f"--locale={_utf8_locale()}",
            "--no-sync",
        ]

    def _start_args(self) -> list[str]:
        assert self.directory is not None
        options = [
            f"-p {self.port}",
            f"-k {self.directory}",
            "-c listen_addresses=127.0.0.1",
            f"-c max_connections={self.max_connections}",
            *(f"-c {s}" for s in (*(() if self.durable else _FAST), *self.settings)),
        ]
        log = self.directory / "server.log"
        return ["start", "-w", "-t", "60", "-D", str(self.directory / "data"), "-l", str(log), "-o", " ".join(options)]

    def _run(self, command: list[str], what: str) -> None:
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, check=False, user=self._user, cwd=self.directory, timeout=120
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise ClusterError(f"{what} failed: {exc}") from exc
        if done.returncode != 0:
            log = self.directory / "server.log" if self.directory else None
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise ClusterError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}\n{tail}")

    def _watch(self, bindir: Path) -> None:
        """A detached watchdog that stops and removes the cluster when this process dies without `stop()`
        (killed, or a test run interrupted before its teardown): a throwaway cluster never outlives its owner."""
        assert self.directory is not None
        subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(bindir / "pg_ctl"), str(self.directory)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not killed with the owner's process group
        )

    def stop(self) -> None:
        """Stop the server at once (its data is thrown away) and remove the directory."""
        if self.directory is None:
            return
        if self.port is not None and (self.directory / "data" / "postmaster.pid").exists():
            bindir = self.bindir or find_bindir()
            data = str(self.directory / "data")
            with contextlib.suppress(ClusterError):
                self._run([str(bindir / "pg_ctl"), "stop", "-m", "immediate", "-D", data], "pg_ctl stop")
        self.port = None
        self._remove()

    def _remove(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


def _unprivileged_user() -> str:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise ClusterError("initdb refuses to run as root and there is no 'postgres' or 'nobody' user to run it as")


@contextlib.contextmanager
def throwaway_cluster(*, durable: bool = False, max_connections: int = 200) -> Iterator[str]:
    """Start a throwaway cluster, yield its DSN, stop and remove it afterwards (also on errors)."""
    cluster = ThrowawayCluster(durable=durable, max_connections=max_connections)
    cluster.start()
    try:
        yield cluster.dsn
    finally:
        cluster.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--durable", action="store_true", help="keep fsync and synchronous commit on")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="a command to run with the DSN in the environment")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    # A termination signal must still remove the cluster: turn it into KeyboardInterrupt.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with throwaway_cluster(durable=args.durable) as dsn:
            if command:
                return subprocess.call(command, env={**os.environ, DSN_ENV: dsn})
            print(dsn, flush=True)
            print("PostgreSQL is running; press Enter (or Ctrl-C) to stop it and remove its data.", file=sys.stderr)
            with contextlib.suppress(EOFError, KeyboardInterrupt):
                input()
            return 0
    except ClusterError as exc:
        print(f"pg_cluster: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
