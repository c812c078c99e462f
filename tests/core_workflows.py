"""Workflows that child processes in the crash tests import by module name."""

import os
import signal

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


def _work(kill):
    if kill:                                       # what an out-of-memory kill does to a worker
        os.kill(os.getpid(), signal.SIGKILL)
    return "worked"


@dl.workflow("core-kills-its-worker")
def kills_its_worker(ctx, kill):
    ctx.step("setup", lambda: "ready")
    ctx.step("work", _work, kill)
    return "done"
