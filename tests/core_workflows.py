"""Workflows that child processes in the crash tests import by module name."""

import durable_lite as dl
from durable_lite import examples as ex


def work(folder, i):
    """One unit of work, counted in the world's tool ledger (which survives kills)."""
    return ex.world_at(folder).tools.call("work", i)["call"]


@dl.workflow("core-budget-kill")
def budget_loop(ctx, folder, total):
    for i in range(total):
        ctx.step("work", work, folder, i)
    return "finished all the work"
