"""A simulated outside world that remembers what happened to it.

A crash of the workflow's process must not reset the world: a real bank does not forget a
refund because your worker died. So every service here keeps its ledger in its own SQLite
file, and a fresh process (or a fresh `World` on the same folder) sees everything earlier
attempts did. Counting the ledger is how lessons and tests prove "refunded once".

    world = World(folder)
    world.payments.refund("A-17", 40, idempotency_key=key)   # honours keys
    world.careless.refund("A-17", 40)                          # ignores keys: pays every time
    world.mailer.send("ana@example.com", "Your refund")           # a key is optional here too
    world.tickets.close("T-17")
    world.llm.complete("Summarise ...")                        # seeded, tokens and cost
    world.tools.call("search", q)                              # flaky, with a failure rate
"""

import hashlib
import json
import os
import random
import sqlite3
import threading
from contextlib import contextmanager

from .store.sqlite import enable_wal


class ToolError(Exception):
    """A simulated transient failure of an outside service."""


def _open(path, ddl):
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    enable_wal(db)              # several processes may open a new world at the same moment
    db.execute("PRAGMA synchronous = NORMAL")
    db.executescript(ddl)
    return db


class _Ledger:
    """A service with its own file. Each write commits at once, like a remote API would."""

    ddl = ""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._db = _open(self.path, self.ddl)
        # One connection per service object, so threads of one process take turns on it
        # (other processes are kept apart by SQLite's own locking).
        self._lock = threading.RLock()

    @contextmanager
    def _transaction(self):
        """One atomic write, even with several threads or processes calling at once."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _counter(self, name) -> int:
        """Increment and return a named counter, atomically across processes."""
        with self._transaction() as db:
            db.execute("INSERT INTO counters VALUES (?, 1) ON CONFLICT(name) DO UPDATE SET n = n + 1", (name,))
            return db.execute("SELECT n FROM counters WHERE name = ?", (name,)).fetchone()[0]

    def _once(self, table, key, columns, values):
        """Insert a row; with a key already seen, return the first row's id instead.

        Returns (row id, repeat). Check and insert happen in one transaction, so two
        callers racing with the same key still produce one row.
        """
        with self._transaction() as db:
            if key is not None:
                row = db.execute(f"SELECT id FROM {table} WHERE idempotency_key = ?", (key,)).fetchone()
                if row:
                    return row[0], True
            cur = db.execute(f"INSERT INTO {table} ({', '.join(columns)}, idempotency_key) "
                             f"VALUES ({', '.join('?' * (len(columns) + 1))})", (*values, key))
            return cur.lastrowid, False

    def close(self):
        self._db.close()


_COUNTERS = "CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL);"


class Payments(_Ledger):
    """A payments provider. With `honours_keys=True` a repeated idempotency key returns the
    original refund instead of paying again; with False (the careless provider) every call
    moves money."""

    ddl = """CREATE TABLE IF NOT EXISTS refunds (
        id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL, amount REAL NOT NULL,
        idempotency_key TEXT);
    CREATE UNIQUE INDEX IF NOT EXISTS refunds_by_key ON refunds (idempotency_key);""" + _COUNTERS

    def __init__(self, path, honours_keys=True):
        super().__init__(path)
        self.honours_keys = honours_keys

    def refund(self, order_id, amount, idempotency_key=None) -> dict:
        self._counter("calls")
        key = idempotency_key if self.honours_keys else None
        row_id, repeat = self._once("refunds", key, ("order_id", "amount"), (order_id, amount))
        if repeat:
            order_id, amount = self._db.execute("SELECT order_id, amount FROM refunds WHERE id = ?",
                                                (row_id,)).fetchone()
        return {"refund_id": f"R-{row_id}", "order_id": order_id, "amount": amount, "repeat": repeat}

    def refunds(self, order_id=None) -> list:
        sql, params = "SELECT id, order_id, amount FROM refunds", ()
        if order_id is not None:
            sql, params = sql + " WHERE order_id = ?", (order_id,)
        return [{"refund_id": f"R-{i}", "order_id": o, "amount": a}
                for i, o, a in self._db.execute(sql + " ORDER BY id", params)]

    def count(self, order_id=None) -> int:
        return len(self.refunds(order_id))

    def total(self, order_id=None) -> float:
        return sum(r["amount"] for r in self.refunds(order_id))

    def calls(self) -> int:
        row = self._db.execute("SELECT n FROM counters WHERE name = 'calls'").fetchone()
        return row[0] if row else 0


class Mailer(_Ledger):
    """Sends email. Every call without a key is a new email. Like many email APIs it also
    accepts an optional idempotency key: a repeated key returns the first message."""

    ddl = """CREATE TABLE IF NOT EXISTS mail (
        id INTEGER PRIMARY KEY AUTOINCREMENT, recipient TEXT NOT NULL, subject TEXT NOT NULL,
        body TEXT, idempotency_key TEXT);
    CREATE UNIQUE INDEX IF NOT EXISTS mail_by_key ON mail (idempotency_key);""" + _COUNTERS

    def send(self, to, subject, body="", idempotency_key=None) -> dict:
        row_id, repeat = self._once("mail", idempotency_key, ("recipient", "subject", "body"),
                                    (to, subject, body))
        return {"message_id": f"M-{row_id}", "to": to, "repeat": repeat}

    def sent(self, to=None) -> list:
        sql, params = "SELECT id, recipient, subject FROM mail", ()
        if to is not None:
            sql, params = sql + " WHERE recipient = ?", (to,)
        return [{"message_id": f"M-{i}", "to": r, "subject": s}
                for i, r, s in self._db.execute(sql + " ORDER BY id", params)]

    def count(self, to=None) -> int:
        return len(self.sent(to))


class TicketDesk(_Ledger):
    """Support tickets. Closing is recorded every time it is asked for (so a double close
    shows up), though a ticket can only end up closed once. An optional idempotency key
    makes a repeated close request a no-op."""

    ddl = """CREATE TABLE IF NOT EXISTS closes (
        id INTEGER PRIMARY KEY AUTOINCREMENT, ticket TEXT NOT NULL, note TEXT,
        idempotency_key TEXT);
    CREATE UNIQUE INDEX IF NOT EXISTS closes_by_key ON closes (idempotency_key);""" + _COUNTERS

    def close(self, ticket, note="", idempotency_key=None) -> dict:
        row_id, repeat = self._once("closes", idempotency_key, ("ticket", "note"), (ticket, note))
        return {"ticket": ticket, "closed": True, "close_id": row_id, "repeat": repeat}

    def closes(self, ticket=None) -> int:
        sql, params = "SELECT COUNT(*) FROM closes", ()
        if ticket is not None:
            sql, params = sql + " WHERE ticket = ?", (ticket,)
        return self._db.execute(sql, params).fetchone()[0]

    def is_closed(self, ticket) -> bool:
        return self.closes(ticket) > 0


class Orders:
    """Read-only order lookup: the same order for the same id, every time."""

    def lookup(self, order_id) -> dict:
        digits = "".join(ch for ch in str(order_id) if ch.isdigit()) or "0"
        return {"id": order_id, "email": f"customer{digits}@example.com", "ticket": f"T-{digits}",
                "total": 20 + int(digits) % 80}


def _seeded(*parts) -> random.Random:
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


_WORDS = ("durable steps replay checkpoints crash resume refund ledger agent tool signal "
          "budget retry backoff memo store workflow idempotent deadline approval plan").split()


class FakeLLM(_Ledger):
    """A seeded stand-in for a model API. Every call is a new generation with a different
    answer (like sampling at temperature > 0), reports tokens and dollars, and is counted in
    its own ledger — so a replayed step that does NOT call it is visible as a count that
    did not move."""

    ddl = """CREATE TABLE IF NOT EXISTS calls (
        generation INTEGER PRIMARY KEY, prompt TEXT NOT NULL, tokens INTEGER NOT NULL,
        cost REAL NOT NULL);""" + _COUNTERS

    def __init__(self, path, seed=0, price_per_1k_tokens=0.01):
        super().__init__(path)
        self.seed = seed
        self.price = price_per_1k_tokens

    def complete(self, prompt, nonce=None) -> dict:
        generation = self._counter("generation")
        rng = _seeded(self.seed, prompt, generation if nonce is None else nonce)
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 12))]
        label = generation if nonce is None else nonce
        text = f"[generation {label}] " + " ".join(words)
        tokens = len(prompt.split()) + len(words) * 3 + 20
        cost = round(tokens / 1000 * self.price, 6)
        with self._transaction() as db:
            db.execute("INSERT INTO calls VALUES (?, ?, ?, ?)", (generation, prompt, tokens, cost))
        return {"text": text, "generation": generation, "tokens": tokens, "cost": cost}

    def plan(self, goal, n_tasks=4) -> dict:
        """A plan of named tasks for `goal`, as a model would propose (one call, billed)."""
        answer = self.complete(f"plan: {goal}")
        rng = _seeded(self.seed, "plan", goal, answer["generation"])
        verbs = ["search", "read", "extract", "compare", "summarise", "check", "draft"]
        tasks = [f"{rng.choice(verbs)}-{i + 1}" for i in range(n_tasks)]
        return {**answer, "tasks": tasks}

    def calls(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def total_cost(self) -> float:
        return round(self._db.execute("SELECT COALESCE(SUM(cost), 0) FROM calls").fetchone()[0], 6)

    def total_tokens(self) -> int:
        return self._db.execute("SELECT COALESCE(SUM(tokens), 0) FROM calls").fetchone()[0]


class FlakyTool(_Ledger):
    """A tool that fails transiently: with probability `failure_rate` per call, or on its
    first `fail_first` calls of each name. Deterministic for a given seed and call count,
    in any process, because the call count lives in the ledger."""

    ddl = """CREATE TABLE IF NOT EXISTS calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, ok INTEGER NOT NULL);""" + _COUNTERS

    def __init__(self, path, failure_rate=0.0, seed=0, fail_first=None):
        super().__init__(path)
        self.failure_rate = failure_rate
        self.seed = seed
        self.fail_first = dict(fail_first or {})   # {tool name: how many first calls fail}

    def call(self, name, payload=None):
        n = self._counter(f"call:{name}")
        failing = n <= self.fail_first.get(name, 0) or \
            _seeded(self.seed, name, n).random() < self.failure_rate
        with self._transaction() as db:
            db.execute("INSERT INTO calls (name, ok) VALUES (?, ?)", (name, 0 if failing else 1))
        if failing:
            raise ToolError(f"{name} failed (call {n})")
        return {"tool": name, "call": n, "output": f"{name}({payload})" if payload is not None else name}

    def calls(self, name=None) -> int:
        sql, params = "SELECT COUNT(*) FROM calls", ()
        if name is not None:
            sql, params = sql + " WHERE name = ?", (name,)
        return self._db.execute(sql, params).fetchone()[0]

    def failures(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM calls WHERE ok = 0").fetchone()[0]


class World:
    """The outside world in one folder: a file per service, shared by every process."""

    def __init__(self, folder, seed=0, failure_rate=0.0, fail_first=None):
        self.folder = os.fspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        path = lambda name: os.path.join(self.folder, name)  # noqa: E731
        self.orders = Orders()
        self.payments = Payments(path("payments.db"), honours_keys=True)
        self.careless = Payments(path("careless_payments.db"), honours_keys=False)
        self.mailer = Mailer(path("mail.db"))
        self.tickets = TicketDesk(path("tickets.db"))
        self.llm = FakeLLM(path("llm.db"), seed=seed)
        self.tools = FlakyTool(path("tools.db"), failure_rate=failure_rate, seed=seed, fail_first=fail_first)

    def summary(self) -> dict:
        """What the world has seen: the numbers a lesson's counters show."""
        return {"refunds": self.payments.count() + self.careless.count(),
                "emails": self.mailer.count(), "tickets_closed": self.tickets.closes(),
                "llm_calls": self.llm.calls(), "tool_calls": self.tools.calls()}

    def close(self):
        """Close every ledger file (TicketDesk.close closes tickets, hence _Ledger.close)."""
        for service in (self.payments, self.careless, self.mailer, self.tickets, self.llm, self.tools):
            _Ledger.close(service)
