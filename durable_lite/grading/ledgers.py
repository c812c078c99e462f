"""Judge an answer by what the simulated world recorded, not by what the answer says.

A learner's function can return any number or id it likes; the world's ledgers (the
payments provider's refunds, the mailer's messages, the model's calls) record what really
happened. So a check compares the two:

    world = Ledgers(folder)
    world.expect(refunds=1, emails=1, when="after a crash at 'refund'")
    world.expect_refund(result["refund_id"], order_id=order, amount=amount)
    world.expect_model_calls(1, why="the model is asked once per post")

Each `expect...` raises `Fail` with a message naming the ledger, what it holds and what was
expected, so a test reads as a list of facts about the world.

`model_bills()` gives the provider's bill for every model call (generation, prompt, tokens,
dollars), and `model_answers()` the text of every answer the fake model generated, in order,
recomputed from its ledger (prompt and generation number): a check can tell whether the text
a run published is the one the model wrote when the run asked, or a later one.

The ledgers are read from the world's files, by this module's own code. A check runs in the
answer's process (the learner's kernel), and there the answer can replace what the grader's
watch does not record: the table of worlds `sim.world_at` hands out, the services of a
World (plain attributes of an instance), a module's constants. A count read through
`durable_lite.sim` could be the answer's word after all. So nothing here asks `sim` what
happened: each service keeps its ledger in a SQLite file whose layout sim.py fixes (the
file names and tables below), and a connection of our own reads the rows committed there —
the rows any process, and a person with `sqlite3`, would see. (`Ledgers.world` still hands
out the live World, for a check that acts on the world: pays refunds before the answer
runs, records in a ledger. Never for counting.)
"""

import functools
import hashlib
import json
import os
import random
import sqlite3

from .. import sim
from ..sim import statement_of, world_at
from .checks import Fail
from .plain import plain

# The counts World.summary() gives, under the names a learner reads in the lessons.
NAMES = {"refunds": "refunds", "emails": "emails", "tickets_closed": "ticket closes",
         "llm_calls": "model calls", "tool_calls": "tool calls"}

# The world's files, as sim.World names them, and the table in each that holds the ledger.
PROVIDERS = (("payments", "payments.db"), ("careless", "careless_payments.db"))   # refunds
MAIL, TICKETS, MODEL, TOOLS = "mail.db", "tickets.db", "llm.db", "tools.db"
OWN = "ledgers.db"                       # every ledger of the world's own: records

# The fake model of a world as `world_at(folder)` opens it (World's default seed), and the
# words it writes with, copied when the grading code is loaded: before any answer runs.
MODEL_SEED = 0
MODEL_WORDS = tuple(sim._WORDS)


class Ledgers:
    """The simulated world kept in `folder`, read for a check."""

    def __init__(self, folder):
        self.folder = os.fspath(folder)

    @property
    def world(self):
        """The folder's live `World` (`sim.world_at`), to act on it; not to count with."""
        return world_at(self.folder)

    # counts ------------------------------------------------------------------------------
    def counts(self) -> dict:
        """{ledger: count}: refunds, emails, tickets_closed, llm_calls, tool_calls, and
        every ledger of your own."""
        out = {"refunds": sum(self._count(file, "refunds") for _, file in PROVIDERS),
               "emails": self._count(MAIL, "mail"), "tickets_closed": self._count(TICKETS, "closes"),
               "llm_calls": self._count(MODEL, "calls"), "tool_calls": self._count(TOOLS, "calls")}
        own = self._rows(OWN, "SELECT ledger, COUNT(*) FROM records GROUP BY ledger ORDER BY MIN(id)")
        for name, n in own:
            # sim refuses a ledger of your own under a built-in's name; a row written into
            # the file under one must not stand in for the built-in's count.
            out.setdefault(name, n)
        return out

    def expect(self, when: str = "", hint: str = "", **want) -> None:
        """Fail unless each named ledger holds exactly the count given."""
        got = self.counts()
        wrong = [f"{NAMES.get(k, k)}: {got.get(k, 0)} (expected {n})"
                 for k, n in want.items() if got.get(k, 0) != n]
        if wrong:
            where = f"{when}, the world recorded " if when else "the world recorded "
            raise Fail(where + "; ".join(wrong), hint)

    # what exactly was recorded -------------------------------------------------------------
    def refunds(self) -> list:
        """Every refund either provider recorded: [{"refund_id", "order_id", "amount",
        "provider"}], the provider that honours keys first, each in the order it paid."""
        out = []
        for provider, file in PROVIDERS:
            out += [{"refund_id": f"R-{i}", "order_id": order, "amount": amount, "provider": provider}
                    for i, order, amount in self._rows(file, "SELECT id, order_id, amount "
                                                              "FROM refunds ORDER BY id")]
        return out

    def expect_refund(self, refund_id, order_id=None, amount=None, what: str = "the answer") -> dict:
        """Fail unless the provider recorded a refund with this id (for this order and amount)."""
        refund_id = plain(refund_id, what)      # an id whose __eq__ says yes to every id
        recorded = self.refunds()
        match = [r for r in recorded if r["refund_id"] == refund_id]
        ids = [r["refund_id"] for r in recorded]
        if not match:
            raise Fail(f"{what} names refund {refund_id!r}, but the provider recorded "
                       f"{_listed(ids) if ids else 'no refund at all'}",
                       "return the refund the provider answered with, not one you made up")
        refund = match[0]
        if order_id is not None and refund["order_id"] != order_id:
            raise Fail(f"{what} names refund {refund_id!r}, which the provider recorded for "
                       f"order {refund['order_id']!r}, not {order_id!r}")
        if amount is not None and refund["amount"] != amount:
            raise Fail(f"{what} names refund {refund_id!r}, which the provider recorded for "
                       f"{refund['amount']:g}, not {amount:g}")
        return refund

    def mail(self, to=None) -> list:
        """[{"message_id", "to", "subject"}] the mailer sent (to one address, if given)."""
        sql, params = "SELECT id, recipient, subject FROM mail", ()
        if to is not None:
            sql, params = sql + " WHERE recipient = ?", (to,)
        return [{"message_id": f"M-{i}", "to": recipient, "subject": subject}
                for i, recipient, subject in self._rows(MAIL, sql + " ORDER BY id", params)]

    def closes(self, ticket=None) -> int:
        """How many times the ticket desk closed a ticket (this one, if given)."""
        if ticket is None:
            return self._count(TICKETS, "closes")
        rows = self._rows(TICKETS, "SELECT COUNT(*) FROM closes WHERE ticket = ?", (ticket,))
        return rows[0][0] if rows else 0

    def model_calls(self) -> int:
        return self._count(MODEL, "calls")

    def expect_model_calls(self, n: int, why: str = "", hint: str = "") -> None:
        calls = self.model_calls()
        if calls != n:
            raise Fail(f"the model was called {calls} time{'s' if calls != 1 else ''}; "
                       f"expected {n}" + (f" ({why})" if why else ""), hint)

    def model_bills(self) -> list:
        """The bill of every model call the provider recorded here, oldest first:
        [{"generation", "prompt", "tokens", "cost"}] (cost in dollars). What the provider
        charged, whatever a run says it spent."""
        rows = self._rows(MODEL, "SELECT generation, prompt, tokens, cost FROM calls ORDER BY generation")
        return [{"generation": g, "prompt": p, "tokens": t, "cost": c} for g, p, t, c in rows]

    def model_answers(self) -> list:
        """The text of every answer the fake model generated here, oldest first."""
        prompts = [bill["prompt"] for bill in self.model_bills()]
        return replay_model(prompts) if prompts else []

    def records(self, ledger: str) -> list:
        """[{"record_id", "key", "detail"}] of a ledger of the world's own ("charges",
        "sms"...), oldest first: what `world.ledger(name).records()` gives."""
        rows = self._rows(OWN, "SELECT n, idempotency_key, detail FROM records WHERE ledger = ? "
                               "ORDER BY id", (ledger,))
        return [{"record_id": f"{ledger}-{n}", "key": key, "detail": json.loads(detail)}
                for n, key, detail in rows]

    def travel_statement(self, trip=None) -> dict:
        """The travel desk's statement (`sim.TravelDesk.statement`) for one trip or all,
        computed from the desk's records as read here."""
        refunds = [r for r in self.refunds() if r["provider"] == "payments"]
        return statement_of(self.records("charges"), refunds, self.records("bookings"),
                            self.records("cancellations"), trip)

    # reading the files ---------------------------------------------------------------------
    def _count(self, file: str, table: str) -> int:
        rows = self._rows(file, f"SELECT COUNT(*) FROM {table}")
        return rows[0][0] if rows else 0

    def _rows(self, file: str, sql: str, params=()) -> list:
        """The rows `sql` selects from one of the world's files: none when the service was
        never used here (no file; connecting would make one), or when its table is not
        there yet (another process is creating the file this moment)."""
        path = os.path.join(self.folder, file)
        if not os.path.exists(path):
            return []
        db = sqlite3.connect(path, timeout=30)
        try:
            return db.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if str(exc).startswith("no such table"):
                return []
            raise
        finally:
            db.close()


# the fake model's answers, recomputed -------------------------------------------------------
def replay_model(prompts, seed: int = MODEL_SEED) -> list:
    """What a fresh fake model answers to `prompts`, in order (generation 1, 2, ...): the
    same texts a world's model gave when it was asked these prompts from its first call."""
    return list(_replayed(tuple(prompts), seed))


@functools.lru_cache(maxsize=512)
def _replayed(prompts: tuple, seed: int) -> tuple:
    return tuple(model_text(prompt, generation, seed)
                 for generation, prompt in enumerate(prompts, start=1))


def model_text(prompt: str, generation: int, seed: int = MODEL_SEED) -> str:
    """The text `sim.FakeLLM.complete` writes for `prompt` as its `generation`-th call: its
    recipe, redone here with the grading code's own modules, so that nothing the answer
    changes in `durable_lite.sim` changes what a check expects the model to have said."""
    rng = _seeded(seed, prompt, generation)
    words = [rng.choice(MODEL_WORDS) for _ in range(rng.randint(6, 12))]
    return f"[generation {generation}] " + " ".join(words)


def _seeded(*parts) -> random.Random:
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _listed(items) -> str:
    items = list(items)
    shown = ", ".join(repr(i) for i in items[:6])
    return shown + (f" and {len(items) - 6} more" if len(items) > 6 else "")
