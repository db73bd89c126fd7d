"""A throwaway PostgreSQL server for the tests: initdb and pg_ctl in a temp folder, on a unix socket and loopback TCP.

The binaries are looked up on PATH, then where Debian's ``postgresql``
package puts them (``/usr/lib/postgresql/<version>/bin``). PostgreSQL refuses
to run as root: as root the cluster is run by the ``postgres`` user (made by
that package) or ``nobody``. :func:`binaries` answers None when no server is
installed, so a test can skip saying so.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PostgresServer", "binaries"]


def binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``, or None if PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(folder, "initdb").exists() and Path(folder, "pg_ctl").exists():
            return Path(folder)
    return None


class PostgresServer:
    """A cluster made and started on entry, stopped and removed on exit; ``url`` names its database."""

    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="mv-pg-"))
        self.data, self.sockets = self.dir / "data", self.dir / "s"
        self.port = _free_port()
        self.url = f"postgresql:///postgres?host={self.sockets}&port={self.port}&user=multiverse"
        #: the same database over TCP on the loopback interface
        self.tcp_url = f"postgresql://multiverse@127.0.0.1:{self.port}/postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = "postgres" if _user("postgres") else "nobody"
            entry = pwd.getpwnam(user)
            for path in (self.dir,):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            self._as = ["runuser", "-u", user, "--"]

    def _run(self, *argv: str) -> None:
        done = subprocess.run([*self._as, *argv], capture_output=True, text=True, cwd=self.dir, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")

    def __enter__(self) -> PostgresServer:
        self._run("mkdir", str(self.sockets))
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "multiverse", "--auth=trust", "-E", "UTF8")
        options = f"-k {self.sockets} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"),
                  "-w", "start")
        return self

    def processes(self) -> list[int]:
        """The cluster's processes: the postmaster (first line of its ``postmaster.pid``) and its children."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # The fields after the command's parentheses: state, then the parent's pid.
                if int(Path(stat).read_text().rpartition(")")[2].split()[1]) == postmaster:
                    children.append(int(Path(stat).parent.name))
        return [postmaster, *children]

    @contextlib.contextmanager
    def silenced(self):
        """The whole cluster stopped (SIGSTOP) inside the block, resumed (SIGCONT) after it.

        Its sockets stay open: the kernel accepts connections to it and
        acknowledges what is sent, and nothing ever answers.
        """
        stopped = self.processes()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield stopped
        finally:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def __exit__(self, *exc: object) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def _user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
