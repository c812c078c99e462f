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
    world.ledger("sms").record(key=key, detail={"to": "+44..."})  # a service of your own

`world_at(folder)` hands out one shared `World` per folder and process, so a step function
can ask for the world on every call without reopening its files.
"""

import hashlib
import json
import os
import random
import sqlite3
import threading
from contextlib import contextmanager

from .store import template
from .store.sqlite import enable_wal


class ToolError(Exception):
    """A simulated transient failure of an outside service."""


def _open(path, ddl):
    # Imported with this module, not here: a service opened inside a Temporal workflow's
    # sandbox (a learner's mistake that lesson 15 and exercise 15 show) may import nothing.
    if not os.path.exists(path):
        template.create_scripted(path, ddl)     # a new file in one step, its tables in it
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    # The world must outlive the workflow's process, not the machine: with synchronous=OFF
    # every commit still reaches the operating system before the call returns (a SIGKILL
    # loses nothing), but no call waits for the disk. A crash sweep opens hundreds of these.
    db.execute("PRAGMA synchronous = OFF")
    enable_wal(db)              # several processes may open a new world at the same moment
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


# The names World.summary() uses for the built-in services; a ledger of your own needs another.
BUILT_IN = ("refunds", "emails", "tickets_closed", "llm_calls", "tool_calls")


class Ledger(_Ledger):
    """A ledger for a service of your own (an SMS gateway, a CRM, a webhook), so its side
    effects are counted like the built-in ones: by the lessons, the crash lab and the sweep.

        sms = world.ledger("sms")
        sms.record(key=ctx_key, detail={"to": "+44 7700 900123", "text": "Refund sent"})

    Every call records one effect. With an idempotency `key` seen before in this ledger,
    nothing new is recorded and the first record comes back with `repeat=True` (like the
    payments provider that honours keys). All of a folder's own ledgers share one file,
    ledgers.db, so any process — and `World.ledgers()` — sees every one of them.
    """

    ddl = """CREATE TABLE IF NOT EXISTS records (
        id INTEGER PRIMARY KEY AUTOINCREMENT, ledger TEXT NOT NULL, n INTEGER NOT NULL,
        idempotency_key TEXT, detail TEXT);
    CREATE UNIQUE INDEX IF NOT EXISTS records_by_key ON records (ledger, idempotency_key);"""

    def __init__(self, path, name):
        super().__init__(path)
        self.name = name

    def record(self, key=None, detail=None) -> dict:
        """Record one effect (unless `key` was recorded before). Returns
        {"record_id": "sms-1", "detail": ..., "repeat": bool}."""
        if key is not None and not isinstance(key, str):
            raise TypeError(f"ledger {self.name!r}: an idempotency key is a string, "
                            f"not {type(key).__name__}")
        try:
            text = json.dumps(detail, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"ledger {self.name!r}: detail must be plain JSON data (dict, list, "
                            f"str, number, bool or None); got {type(detail).__name__} ({exc})") from None
        with self._transaction() as db:
            if key is not None:
                row = db.execute("SELECT n, detail FROM records WHERE ledger = ? AND idempotency_key = ?",
                                 (self.name, key)).fetchone()
                if row:
                    return {"record_id": f"{self.name}-{row[0]}", "detail": json.loads(row[1]),
                            "repeat": True}
            n = db.execute("SELECT COUNT(*) FROM records WHERE ledger = ?", (self.name,)).fetchone()[0] + 1
            db.execute("INSERT INTO records (ledger, n, idempotency_key, detail) VALUES (?, ?, ?, ?)",
                       (self.name, n, key, text))
        return {"record_id": f"{self.name}-{n}", "detail": json.loads(text), "repeat": False}

    def records(self) -> list:
        return [{"record_id": f"{self.name}-{n}", "key": key, "detail": json.loads(detail)}
                for n, key, detail in self._db.execute(
                    "SELECT n, idempotency_key, detail FROM records WHERE ledger = ? ORDER BY id",
                    (self.name,))]

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM records WHERE ledger = ?", (self.name,)).fetchone()[0]

    def __repr__(self):
        return f"Ledger({self.name!r}, {self.count()} records)"


LEDGERS_FILE = "ledgers.db"


class _Service:
    """A World attribute that opens its ledger file the first time it is used, so a world
    that only ever refunds does not create (or pay for) a mail, desk, model and tool file."""

    def __init__(self, filename, make):
        self.filename, self.make = filename, make

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, world, owner=None):
        if world is None:
            return self
        service = self.make(world, os.path.join(world.folder, self.filename))
        world.__dict__[self.name] = service      # from now on a plain attribute
        return service


class World:
    """The outside world in one folder: a file per service, shared by every process.
    Each service's file is opened (and created) when the service is first used."""

    payments = _Service("payments.db", lambda w, path: Payments(path, honours_keys=True))
    careless = _Service("careless_payments.db", lambda w, path: Payments(path, honours_keys=False))
    mailer = _Service("mail.db", lambda w, path: Mailer(path))
    tickets = _Service("tickets.db", lambda w, path: TicketDesk(path))
    llm = _Service("llm.db", lambda w, path: FakeLLM(path, seed=w.seed))
    tools = _Service("tools.db", lambda w, path: FlakyTool(path, failure_rate=w.failure_rate,
                                                            seed=w.seed, fail_first=w.fail_first))
    SERVICES = ("payments", "careless", "mailer", "tickets", "llm", "tools")

    def __init__(self, folder, seed=0, failure_rate=0.0, fail_first=None):
        self.folder = os.fspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        self.seed, self.failure_rate, self.fail_first = seed, failure_rate, fail_first
        self.orders = Orders()
        self._ledgers = {}

    def _used(self, service) -> bool:
        """Has any process used this service in this folder (is there anything to count)?"""
        return (service in self.__dict__
                or os.path.exists(os.path.join(self.folder, getattr(World, service).filename)))

    def ledger(self, name: str) -> Ledger:
        """The ledger of a service of your own, by name (created on first use)."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a ledger needs a non-empty name, not {name!r}")
        if name in BUILT_IN:
            raise ValueError(f"ledger name {name!r} is taken by a built-in service "
                             f"({', '.join(BUILT_IN)}); choose another, e.g. 'sms'")
        if name not in self._ledgers:
            self._ledgers[name] = Ledger(os.path.join(self.folder, LEDGERS_FILE), name)
        return self._ledgers[name]

    def ledgers(self) -> list:
        """Names of the ledgers of your own that hold a record (any process), first used first."""
        path = os.path.join(self.folder, LEDGERS_FILE)
        if not os.path.exists(path):
            return []
        db = sqlite3.connect(path, timeout=30)
        try:
            rows = db.execute("SELECT ledger FROM records GROUP BY ledger ORDER BY MIN(id)").fetchall()
        except sqlite3.OperationalError:        # created by another process a moment ago
            rows = []
        finally:
            db.close()
        return [name for name, in rows]

    def summary(self) -> dict:
        """What the world has seen: the numbers a lesson's counters show, then one count per
        ledger of your own that holds a record."""
        def count(service, how):
            return how(getattr(self, service)) if self._used(service) else 0

        out = {"refunds": count("payments", Payments.count) + count("careless", Payments.count),
               "emails": count("mailer", Mailer.count), "tickets_closed": count("tickets", TicketDesk.closes),
               "llm_calls": count("llm", FakeLLM.calls), "tool_calls": count("tools", FlakyTool.calls)}
        for name in self.ledgers():
            out[name] = self.ledger(name).count()
        return out

    def close(self):
        """Close every ledger file (TicketDesk.close closes tickets, hence _Ledger.close)."""
        opened = [self.__dict__[name] for name in self.SERVICES if name in self.__dict__]
        for service in (*opened, *self._ledgers.values()):
            _Ledger.close(service)


# one World per folder and process ------------------------------------------------------
_worlds = {}
# Threads share the table (a grader runs checks side by side): one looking for its world
# while another forgets a folder's must not see the table change under it.
_worlds_lock = threading.RLock()


def world_at(folder, **options) -> World:
    """One World object per folder (and options) in this process, opened on first use.

    Step functions call it on every call: the ledger files are opened once, not per step.
    """
    # A forked child opens its own: SQLite connections must not cross a fork.
    key = (os.fspath(folder), tuple(sorted(options.items())), os.getpid())
    with _worlds_lock:
        if key not in _worlds:
            _worlds[key] = World(folder, **options)
        return _worlds[key]


def forget_worlds(folder) -> None:
    """Close and forget the shared World objects of `folder` and every folder inside it
    (before the folder is deleted, or to see it as a fresh process would)."""
    folder = os.fspath(folder)
    inside = folder.rstrip(os.sep) + os.sep
    with _worlds_lock:
        gone = [_worlds.pop(k) for k in list(_worlds)
                if k[0] == folder or str(k[0]).startswith(inside)]
    for world in gone:
        world.close()


# A travel desk: effects that can be undone, and refusals that are final ----------------------
# Lesson 09's suppliers: a card to charge, an airline, a car hire and hotels. They keep their
# records on the folder's own ledgers ("charges", "bookings", "cancellations") and refund
# through the payments provider ("refunds"), so World.summary(), the crash sweep and the
# crash lab count all of it with no wiring of their own.

class Refused(Exception):
    """A supplier's final answer (sold out, card declined, fare not cancellable): asking
    again gives the same answer, so a step that meets one should fail for good."""


# What the suppliers sell. `left` is how many can be booked at once (0: sold out);
# a saver fare cannot be cancelled.
OFFERS = {
    "TP662-flex": {"kind": "flight", "what": "Lisbon to Amsterdam, flexible fare", "price": 420,
                   "left": 9, "cancellable": True},
    "TP662-saver": {"kind": "flight", "what": "Lisbon to Amsterdam, saver fare", "price": 290,
                    "left": 9, "cancellable": False},
    "KL1692-flex": {"kind": "flight", "what": "Amsterdam to Lisbon, flexible fare", "price": 380,
                    "left": 9, "cancellable": True},
    "car-compact": {"kind": "car", "what": "compact car, 3 days", "price": 160, "left": 5,
                    "cancellable": True},
    "car-van": {"kind": "car", "what": "van, 3 days", "price": 310, "left": 2, "cancellable": True},
    "hotel-canal-house": {"kind": "hotel", "what": "Canal House, 3 nights", "price": 540,
                          "left": 0, "cancellable": True},
    "hotel-harbour-inn": {"kind": "hotel", "what": "Harbour Inn, 3 nights", "price": 480,
                          "left": 4, "cancellable": True},
    "hotel-dam-square": {"kind": "hotel", "what": "Dam Square Hotel, 3 nights", "price": 610,
                         "left": 0, "cancellable": True},
}
CARD_LIMIT = 2000          # euros: a larger charge is declined


def offer(name) -> dict:
    """The catalogue entry of an offer (a copy), or a ValueError that lists the offers."""
    if name not in OFFERS:
        raise ValueError(f"no offer {name!r}; the travel desk sells {', '.join(OFFERS)}")
    return {"offer": name, **OFFERS[name]}


class TravelDesk:
    """The travel suppliers of one world folder. References are the caller's: a charge or
    booking is made once per reference (a repeat returns the first, with repeat=True), and
    undone by the same reference, so an undo needs nothing but what the workflow chose
    before the step ran. An undo with nothing to undo does nothing and says so.

        desk = travel_at(folder)
        desk.charge("trip-7", 1120, reference=k1)              # "charges"
        desk.book("TP662-flex", reference=k2)                  # "bookings"
        desk.cancel(k2, idempotency_key=u2)                    # "cancellations"
        desk.refund(k1, idempotency_key=u1)                    # payments: "refunds"
        desk.statement()                                       # do the ledgers balance?

    Every cancel or refund request is recorded unless its idempotency key was seen before,
    so an undo run twice without a key shows up twice (an airline would take its fee twice).
    """

    def __init__(self, world):
        self.world = world

    def _ledger(self, name):
        return self.world.ledger(name)

    @staticmethod
    def _by_key(records, key):
        return next((r for r in records if r["key"] == key), None)

    # forward -------------------------------------------------------------------------------
    def charge(self, trip, amount, reference) -> dict:
        if amount > CARD_LIMIT:
            raise Refused(f"card declined: {amount} EUR is over the card's limit of {CARD_LIMIT} EUR")
        done = self._ledger("charges").record(key=reference, detail={"trip": trip, "amount": amount})
        return {"charge_id": done["record_id"], **done["detail"], "repeat": done["repeat"]}

    def book(self, name, reference, trip=None) -> dict:
        item = offer(name)
        bookings = self._ledger("bookings")
        earlier = self._by_key(bookings.records(), reference)
        if earlier is None and self._held(name) >= item["left"]:
            raise Refused(f"{name} ({item['what']}) is sold out")
        done = bookings.record(key=reference, detail={"offer": name, "kind": item["kind"],
                                                      "price": item["price"], "trip": trip})
        return {"booking_id": done["record_id"], **done["detail"], "repeat": done["repeat"]}

    # undo ----------------------------------------------------------------------------------
    def cancel(self, reference, idempotency_key=None) -> dict:
        booking = self._by_key(self._ledger("bookings").records(), reference)
        if booking is None:
            return {"cancelled": False, "reason": "no booking with this reference"}
        name = booking["detail"]["offer"]
        if not OFFERS[name]["cancellable"]:
            raise Refused(f"booking {booking['record_id']} ({name}) cannot be cancelled: "
                          f"{OFFERS[name]['what']}")
        done = self._ledger("cancellations").record(
            key=idempotency_key, detail={"booking_id": booking["record_id"], "offer": name})
        return {"cancelled": True, "cancellation_id": done["record_id"], **done["detail"],
                "repeat": done["repeat"]}

    def refund(self, reference, idempotency_key=None) -> dict:
        charge = self._by_key(self._ledger("charges").records(), reference)
        if charge is None:
            return {"refunded": False, "reason": "no charge with this reference"}
        paid = self.world.payments.refund(charge["detail"]["trip"], charge["detail"]["amount"],
                                          idempotency_key=idempotency_key)
        return {"refunded": True, "charge_id": charge["record_id"], **paid}

    # looking -------------------------------------------------------------------------------
    def _held(self, name=None) -> int:
        return len([b for b in self._bookings_held() if name is None or b["detail"]["offer"] == name])

    def _bookings_held(self, trip=None) -> list:
        cancelled = {c["detail"]["booking_id"] for c in self._ledger("cancellations").records()}
        return [b for b in self._ledger("bookings").records()
                if b["record_id"] not in cancelled and trip in (None, b["detail"]["trip"])]

    def statement(self, trip=None) -> dict:
        """What the customer paid and holds, in euros (for one trip, or the whole folder):
        see `statement_of`."""
        return statement_of(self._ledger("charges").records(), self.world.payments.refunds(),
                            self._ledger("bookings").records(),
                            self._ledger("cancellations").records(), trip)


def statement_of(charges, refunds, bookings, cancellations, trip=None) -> dict:
    """A travel desk's statement from its ledgers' records (as `Ledger.records()` and
    `Payments.refunds()` give them), for one trip or for all: `balance` = charged - refunded
    - the price of the bookings still held. 0 when the ledgers balance; above 0, money taken
    for nothing; below 0, money given back twice or a booking kept for free.
    `cancelled_twice` counts bookings cancelled more than once. A function of the records
    alone, so a check can compute it from records it read from the files itself."""
    def ours(record_trip):
        return trip in (None, record_trip)

    charged = sum(c["detail"]["amount"] for c in charges if ours(c["detail"]["trip"]))
    refunded = sum(r["amount"] for r in refunds if ours(r["order_id"]))
    refunded = int(refunded) if float(refunded).is_integer() else refunded   # 1120, not 1120.0
    cancelled = {c["detail"]["booking_id"] for c in cancellations}
    trip_bookings = [b for b in bookings if ours(b["detail"]["trip"])]
    held = [b for b in trip_bookings if b["record_id"] not in cancelled]
    per_booking = {}
    for c in cancellations:
        booking = c["detail"]["booking_id"]
        if any(b["record_id"] == booking for b in trip_bookings):
            per_booking[booking] = per_booking.get(booking, 0) + 1
    held_value = sum(b["detail"]["price"] for b in held)
    return {"charged": charged, "refunded": refunded, "held": [b["detail"]["offer"] for b in held],
            "held_value": held_value, "balance": charged - refunded - held_value,
            "cancelled_twice": sum(1 for n in per_booking.values() if n > 1)}


def travel_at(folder) -> TravelDesk:
    """The travel desk of the world at `folder` (its shared `world_at` object)."""
    return TravelDesk(world_at(folder))
# a model provider with a rate limit (lesson 11, durable queues) ------------------------
class RateLimited(ToolError):
    """HTTP 429 Too Many Requests: the provider refused the call. Try again later."""

    status = 429

    def __init__(self, message, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after      # seconds until the provider's next window


class ModelProvider(_Ledger):
    """A model API with a rate limit, keeping a ledger of every request it receives.

    It answers at most `limit` requests in each second of its clock (fixed one-second
    windows: 12:00:03.000 up to 12:00:04.000). Any further request in that second is
    refused at once with `RateLimited` (HTTP 429), before any work: it is not billed, but
    it is in the ledger like every request — a refused request still counts against a
    real provider's limits too (OpenAI's help centre: "unsuccessful requests contribute to
    your per-minute limit").

    An answer takes time: `first_token` seconds, then `tokens_per_second` for the output,
    whose length is seeded (the same in every run of a simulation). The caller waits on the
    provider's clock, so on a `simtime.VirtualClock` a thread waits in simulated time while
    the others carry on; on a real clock it really sleeps. A refusal comes back after
    `refusal_seconds`.

        provider = ModelProvider(folder / "provider.db", limit=20, clock=clock)
        answer = provider.complete(prompt, caller="doc-17", tenant="acme")
        provider.per_second()     # requests, answered, refused and tokens, second by second
    """

    ddl = """CREATE TABLE IF NOT EXISTS requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, second INTEGER NOT NULL,
        caller TEXT, tenant TEXT, answered INTEGER NOT NULL, input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL, cost REAL NOT NULL);
    CREATE INDEX IF NOT EXISTS requests_by_second ON requests (second, answered);"""

    def __init__(self, path, *, limit=20, clock=None, seed=0, first_token=0.5,
                 tokens_per_second=100.0, refusal_seconds=0.05, price_per_1k_tokens=0.01,
                 model="fake-large"):
        if type(limit) is not int or limit < 1:
            raise ValueError(f"a provider's limit is a whole number of requests a second >= 1, "
                             f"not {limit!r}")
        super().__init__(path)
        import time
        self.limit, self.seed, self.model = limit, seed, model
        self.clock = clock or time.time
        self.first_token, self.tokens_per_second = first_token, tokens_per_second
        self.refusal_seconds, self.price = refusal_seconds, price_per_1k_tokens

    def complete(self, prompt: str, *, caller=None, tenant=None) -> dict:
        """Answer `prompt` (its words count as input tokens), or raise RateLimited."""
        import math
        now = self.clock()
        second = math.floor(now)
        input_tokens = len(prompt.split())
        with self._transaction() as db:
            answered = db.execute("SELECT COUNT(*) FROM requests WHERE second = ? AND answered = 1",
                                  (second,)).fetchone()[0] < self.limit
            number = db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] + 1
            output_tokens = _seeded(self.seed, "provider", number).randint(60, 400) if answered else 0
            cost = round((input_tokens + output_tokens) / 1000 * self.price, 6) if answered else 0.0
            db.execute("INSERT INTO requests (at, second, caller, tenant, answered, input_tokens, "
                       "output_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (now, second, caller, tenant, int(answered), input_tokens, output_tokens, cost))
        if not answered:
            self._wait(self.refusal_seconds)
            raise RateLimited(f"429 Too Many Requests: {self.limit} requests a second at most "
                              f"(request {number})", retry_after=second + 1 - now)
        self._wait(self.first_token + output_tokens / self.tokens_per_second)
        return {"text": f"[answer {number}] " + " ".join(["summary"] * 8), "model": self.model,
                "provider": "durable_lite.sim", "input_tokens": input_tokens,
                "output_tokens": output_tokens, "tokens": input_tokens + output_tokens,
                "cost": cost}

    def _wait(self, seconds):
        sleep = getattr(self.clock, "sleep", None)
        if sleep is None:
            import time
            sleep = time.sleep
        sleep(seconds)

    def per_second(self) -> list:
        """One row per second from the first request to the last (quiet seconds included):
        second (from the first request's), requests, answered, refused, tokens billed, and
        input tokens of refused requests."""
        rows = self._db.execute(
            "SELECT second, COUNT(*), SUM(answered), SUM(CASE WHEN answered = 1 THEN "
            "input_tokens + output_tokens END), SUM(CASE WHEN answered = 0 THEN input_tokens END) "
            "FROM requests GROUP BY second ORDER BY second").fetchall()
        if not rows:
            return []
        by_second = {r[0]: r for r in rows}
        first, last = rows[0][0], rows[-1][0]
        out = []
        for s in range(first, last + 1):
            _, n, answered, billed, refused_in = by_second.get(s, (s, 0, 0, 0, 0))
            out.append({"second": s - first, "requests": n, "answered": answered,
                        "refused": n - answered, "tokens": billed or 0,
                        "refused_input_tokens": refused_in or 0})
        return out

    def totals(self) -> dict:
        """Requests, answered, refused, tokens billed, cost, input tokens sent in refused
        requests, and the most requests answered in any one second."""
        n, answered, billed, cost, refused_in = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(answered), 0), COALESCE(SUM(CASE WHEN "
            "answered = 1 THEN input_tokens + output_tokens END), 0), COALESCE(SUM(cost), 0), "
            "COALESCE(SUM(CASE WHEN answered = 0 THEN input_tokens END), 0) FROM requests").fetchone()
        peak = self._db.execute("SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM "
                                "requests GROUP BY second)").fetchone()[0]
        return {"requests": n, "answered": answered, "refused": n - answered, "tokens": billed,
                "cost": round(cost, 6), "refused_input_tokens": refused_in,
                "peak_requests_per_second": peak}

    def requests(self) -> list:
        """Every request: at, caller, tenant, answered, input and output tokens, cost."""
        return [{"at": at, "caller": caller, "tenant": tenant, "answered": bool(answered),
                 "input_tokens": i, "output_tokens": o, "cost": c}
                for at, caller, tenant, answered, i, o, c in self._db.execute(
                    "SELECT at, caller, tenant, answered, input_tokens, output_tokens, cost "
                    "FROM requests ORDER BY id")]
