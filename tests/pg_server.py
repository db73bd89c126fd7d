"""A throwaway PostgreSQL server for the tests: initdb and pg_ctl in a temp folder, on a unix socket.

The binaries are looked up on PATH, then where Debian's ``postgresql``
package puts them (``/usr/lib/postgresql/<version>/bin``). PostgreSQL refuses
to run as root: as root the cluster is run by the ``postgres`` user (made by
that package) or ``nobody``. :func:`binaries` answers None when no server is
installed, so a test can skip saying so.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
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
        options = f"-k {self.sockets} -p {self.port} -c listen_addresses='' -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"),
                  "-w", "start")
        return self

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
