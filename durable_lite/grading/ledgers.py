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
"""

import functools
import os

from ..sim import FakeLLM, world_at
from .checks import Fail

# The counts World.summary() gives, under the names a learner reads in the lessons.
NAMES = {"refunds": "refunds", "emails": "emails", "tickets_closed": "ticket closes",
         "llm_calls": "model calls", "tool_calls": "tool calls"}


class Ledgers:
    """The simulated world kept in `folder`, read for a check."""

    def __init__(self, folder):
        self.folder = os.fspath(folder)
        self.world = world_at(self.folder)

    # counts ------------------------------------------------------------------------------
    def counts(self) -> dict:
        """{ledger: count}: refunds, emails, tickets_closed, llm_calls, tool_calls, and
        every ledger of your own."""
        return self.world.summary()

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
        "provider"}], in the order they were paid."""
        out = []
        for provider in ("payments", "careless"):
            if self.world._used(provider):
                out += [{**r, "provider": provider} for r in getattr(self.world, provider).refunds()]
        return out

    def expect_refund(self, refund_id, order_id=None, amount=None, what: str = "the answer") -> dict:
        """Fail unless the provider recorded a refund with this id (for this order and amount)."""
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
        return self.world.mailer.sent(to) if self.world._used("mailer") else []

    def model_calls(self) -> int:
        return self.world.llm.calls() if self.world._used("llm") else 0

    def expect_model_calls(self, n: int, why: str = "", hint: str = "") -> None:
        calls = self.model_calls()
        if calls != n:
            raise Fail(f"the model was called {calls} time{'s' if calls != 1 else ''}; "
                       f"expected {n}" + (f" ({why})" if why else ""), hint)

    def model_bills(self) -> list:
        """The bill of every model call the provider recorded here, oldest first:
        [{"generation", "prompt", "tokens", "cost"}] (cost in dollars). What the provider
        charged, whatever a run says it spent."""
        if not self.world._used("llm"):
            return []
        rows = self.world.llm._db.execute(
            "SELECT generation, prompt, tokens, cost FROM calls ORDER BY generation")
        return [{"generation": g, "prompt": p, "tokens": t, "cost": c} for g, p, t, c in rows]

    def model_answers(self) -> list:
        """The text of every answer the fake model generated here, oldest first."""
        prompts = [bill["prompt"] for bill in self.model_bills()]
        return replay_model(prompts, seed=self.world.llm.seed) if prompts else []


def replay_model(prompts, seed: int = 0) -> list:
    """What a fresh fake model answers to `prompts`, in order (generation 1, 2, ...): the
    same texts a world's model gave when it was asked these prompts from its first call."""
    return list(_replayed(tuple(prompts), seed))


@functools.lru_cache(maxsize=512)
def _replayed(prompts: tuple, seed: int) -> tuple:
    model = FakeLLM(":memory:", seed=seed)       # the same model, with a ledger in memory
    try:
        return tuple(model.complete(prompt)["text"] for prompt in prompts)
    finally:
        model.close()


def _listed(items) -> str:
    items = list(items)
    shown = ", ".join(repr(i) for i in items[:6])
    return shown + (f" and {len(items) - 6} more" if len(items) > 6 else "")
