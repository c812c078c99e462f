"""Every error durable_lite raises, in one place.

Each message names the run, step or file involved, so a learner reading a traceback in a
notebook knows where to look without opening the engine.
"""


class DurableError(Exception):
    """Base class for every error durable_lite raises on purpose."""


class NonDeterminismError(DurableError):
    """Replay reached a recorded position, but the workflow asked for something else there."""


class StepResultNotJSON(DurableError):
    """A step returned a value the store cannot record as JSON."""


class StoreFileError(DurableError):
    """A store file cannot be used: it is damaged (a read or write met a page, an index or a
    value durable_lite did not write), it is not a durable_lite database, it was written by
    a newer version, or the path cannot hold a store. The message names the file."""


class UnknownRunError(DurableError, KeyError):
    """No run with that id exists in the store."""

    def __str__(self):  # KeyError would otherwise print the message in quotes
        return self.args[0] if self.args else ""


class RunFinishedError(DurableError):
    """The operation needs a run that is still going, but this one has finished."""


class RunArgumentsMismatch(DurableError):
    """`start` was given a run id that exists, with different arguments."""


class QueuedRunError(DurableError):
    """A queued run was asked to run outside its queue (resume or start): only a worker's
    engine.work(queue) starts it, within the queue's limits (queue.py)."""


class WorkflowNotRegistered(DurableError):
    """A run needs workflow code (name, version) that this process has not defined."""


class LeaseHeldError(DurableError):
    """Another live worker holds the lease on this run."""


class SharedWorkerError(DurableError):
    """An engine with a worker name given by hand was inherited by a forked process: two
    processes would work under one name, and each would take the other's leases for its own."""


class LeaseLostError(DurableError):
    """This worker's lease expired and another worker took the run over."""


class StepTimeout(DurableError):
    """A step attempt ran longer than its timeout."""


class Crash(BaseException):
    """A simulated crash, raised by fault injection.

    A BaseException (like KeyboardInterrupt) so that `except Exception` in workflow or step
    code cannot swallow it: a real crash cannot be caught either.
    """


class StoreWriteError(DurableError):
    """A write the run needed (a checkpoint) failed in the store. The execution stops there,
    whatever the workflow catches; the run stays resumable once the store works again."""


class ContextCallError(DurableError):
    """A ctx method was called from somewhere other than the workflow function itself:
    inside a step's function, or from another thread."""


# versioning long-lived runs (versioning.py) -----------------------------------------------
class UpgradeRefused(DurableError):
    """A run cannot move to another version of its workflow (engine.upgrade, or a fork onto
    that version): no migration leads there, a migration failed, or the new version's code
    cannot replay the run's history. The message says which; nothing was changed."""


class UnknownStepError(DurableError, KeyError):
    """The run has no recorded step or wait with that label."""

    def __str__(self):  # KeyError would otherwise print the message in quotes
        return self.args[0] if self.args else ""
