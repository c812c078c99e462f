"""What the simulated world remembers of a run: the numbers every engine's port must match.

One function, so that parity.py (which compares engines) and each engine's own support
(which counts what a kill did) read the world the same way, without importing each other.
"""

from ...sim import World


def ledger(folder) -> dict:
    """The simulated world in `folder`, counted: refunds, emails, closes, tools, model calls."""
    world = World(folder)
    try:
        return {"refunds paid": world.payments.count() + world.careless.count(),
                "refund requests": world.payments.calls(),
                "emails": world.mailer.count(), "tickets closed": world.tickets.closes(),
                "tool calls": world.tools.calls(), "deliveries": world.tools.calls("deliver"),
                "model calls": world.llm.calls()}
    finally:
        world.close()
