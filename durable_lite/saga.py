"""`Saga`: when a step fails for good, undo what the run did, newest first, durably.

Retries make a step succeed in the end, unless it never will: the hotel is sold out, the
card is declined, the desk refuses for good. Retrying forever is wrong, and so is stopping
there: the card is charged and the flight booked for a trip that will not happen. A saga
gives each step that changes the world an *undo*, and when a step fails for good it runs
the undos of everything the run did, in reverse, as durably as the steps themselves::

    @dl.workflow("trip")
    def trip(ctx, folder, trip_id):
        with dl.Saga(ctx) as saga:
            paid = ctx.idempotency_key("charge", trip_id)
            saga.step("charge", charge_card, folder, trip_id, 1120, paid,
                      undo=(refund_card, folder, paid))
            seat = ctx.idempotency_key("flight", trip_id)
            saga.step("flight", book, folder, "TP662-flex", seat,
                      undo=(cancel_booking, folder, seat))
            ...
        return "booked"

The rules, and why each one is there:

- `saga.step(name, fn, *args, undo=(undo_fn, *undo_args), **kwargs)` is `ctx.step(name,
  fn, *args, **kwargs)` that also registers the undo (`undo=None`: nothing to undo, say a
  lookup). Every other keyword still goes to `fn`; `undo` is the one the saga keeps.
- The undo is registered *before* the step runs, so the step that fails is undone too.
  "Failed for good" is what the workflow saw, not what the world did: an attempt may
  have timed out after the airline booked the seat. So an undo names its effect by a
  reference the workflow chose before the step ran (its idempotency key, above), and must
  do nothing when there is nothing to undo.
- Each undo is a durable step of its own, labelled "undo:" + the step's label ("undo:flight";
  "undo:hotel(2)" for a second "hotel"), and called as
  `undo_fn(*undo_args, idempotency_key=key)` with `key = ctx.idempotency_key("undo",
  label)`: the same in every process, different for every step and run. A crash while
  compensating is resumed like any run: recorded undos replay, the rest execute, so none
  is skipped; a crash between an undo's effect and its checkpoint runs it again, and the
  key makes the provider answer with the first refund instead of paying twice. So every
  undo must hand its key on (a function without `idempotency_key=` is refused when the
  undo is registered, on the first run, not in the middle of a compensation).
- Only a step that failed for good starts the undos: StepFailed leaving the `with` block.
  Any other exception does not, so a bug in the workflow's own code fails the run (fix it,
  resume, it carries on) instead of cancelling bookings a fixed workflow would have kept.
  To give up for a reason of your own, call `saga.compensate("quote over budget")`.
- The recorded undos are the memory: the list of undos is not stored anywhere, replay
  rebuilds it as the replayed steps register theirs again. Compensating is just more
  steps at the end of the run's history.

How a run that compensated ends: with status `compensated` (`dl.COMPENSATED`), and as result
`{"failed_step": "hotel", "error": "...", "undos": ["undo:hotel", "undo:car", ...]}`.
Not `completed`: the trip was not booked, and whatever counts completed runs as sales must
not count it. Not `failed`: failed means "someone should look, and resume retries the step",
and there is nothing to retry — the world is back where it was; retrying the booking would
be a new trip (a new run). So `resume` returns a compensated run as it is, and it gets no
signals. (Temporal, DBOS, Restate and Inngest end such a run as failed, after the undos, by
re-raising the error; the difference is then only in the error's text.)

An undo that itself fails for good (a saver fare cannot be cancelled) is not lost: it is
recorded like any failed step (engine.history shows it "failed", engine.events its attempts),
the undos after it still run, and the run ends `failed` with a CompensationFailed error that
names every undo that failed. That run needs a person: settle it by hand, or fix the cause
and `engine.invalidate(run_id, "undo:flight")` then `engine.resume(run_id)` — the undos from
there run again, and their keys turn the ones that had already worked into no-ops. (When
the undo that failed is the run's last entry, `resume` alone gives it its attempts again,
as it does for any failed run.)

A budget still applies while a run compensates (undos are steps): it can halt the run
halfway back, and a resume with a new budget carries on undoing. Sagas do not nest: a
Compensated raised inside another saga's block passes through it without running that
saga's undos, so give a run one saga.
"""

from .context import RunEnding, StepFailed
from .errors import DurableError
from .store.records import COMPENSATED

UNDO_PREFIX = "undo:"


class Compensated(RunEnding):
    """Raised by `Saga.compensate` once every undo has run: the engine ends the run with
    status "compensated" and `result` as its result (a RunEnding, so the engine needs to
    know nothing of sagas). Catch it to do something after the undos (say, tell the
    customer), then raise it again."""

    status = COMPENSATED

    def __init__(self, run_id, failed_step, error, undos):
        self.run_id, self.failed_step, self.error, self.undos = run_id, failed_step, error, list(undos)
        what = f"step {failed_step!r} failed for good ({error})" if failed_step else error
        done = ", ".join(self.undos) if self.undos else "nothing to undo"
        super().__init__(f"run {run_id!r} compensated: {what}; undone in reverse: {done}")

    @property
    def result(self) -> dict:
        return {"failed_step": self.failed_step, "error": self.error, "undos": self.undos}


class CompensationFailed(DurableError):
    """Some undo failed for good: the world is not back where it was, and a person must act.
    The run ends "failed" with this error; `failed_undos` is [(label, error), ...]."""

    def __init__(self, run_id, failed_step, error, undos, failed_undos):
        self.run_id, self.failed_step, self.error = run_id, failed_step, error
        self.undos, self.failed_undos = list(undos), list(failed_undos)
        why = f"step {failed_step!r} failed for good ({error})" if failed_step else error
        broken = "; ".join(f"{label} ({reason})" for label, reason in self.failed_undos)
        n = len(self.failed_undos)
        super().__init__(
            f"run {run_id!r} could not undo everything after {why}: {n} of {len(self.undos)} "
            f"undo(s) failed for good: {broken}. The others ran. Settle it by hand, or fix the "
            f"cause, engine.invalidate({run_id!r}, {self.failed_undos[0][0]!r}) and resume.")


class _Undo:
    """One registered undo: what to call, and (once its step has taken a position) the
    label of the step it undoes."""

    __slots__ = ("fn", "args", "label")

    def __init__(self, fn, args):
        self.fn, self.args, self.label = fn, args, None


class Saga:
    """Steps with undos, for one run of a workflow: `with dl.Saga(ctx) as saga: ...`.

    undo_retry: a `dl.Retry` for every undo step (default: one attempt, as for ctx.step).
                An undo should get more than one: it is the last chance to set things right.
    """

    def __init__(self, ctx, undo_retry=None):
        self.ctx = ctx
        self.undo_retry = undo_retry
        self._undos = []
        self._compensating = False

    # the forward path -------------------------------------------------------------------
    def step(self, step, fn, *args, undo, **kwargs):
        """`ctx.step(step, fn, *args, **kwargs)`, with `undo=(undo_fn, *undo_args)` (or None)
        registered first. Returns the step's result; raises StepFailed like ctx.step."""
        ctx = self.ctx
        if self._compensating:
            raise RuntimeError(f"run {ctx.run_id!r}: saga.step({_name(step)!r}) called while the "
                               "saga is compensating; a saga that has started undoing takes no "
                               "new steps")
        registered = None
        if undo is not None:
            registered = self._register(_name(step), undo)
        position = ctx.position
        try:
            result = ctx.step(step, fn, *args, **kwargs)
        except StepFailed as failed:
            if registered is not None:
                registered.label = failed.step
            raise
        if registered is not None:
            registered.label = ctx.entries[position].label
        return result

    def _register(self, name, undo):
        if not isinstance(undo, (tuple, list)) or not undo or not callable(undo[0]):
            raise TypeError(f"run {self.ctx.run_id!r}: the undo of step {name!r} must be a tuple "
                            f"(undo_fn, *args), or None when there is nothing to undo; got {undo!r}")
        fn, args = undo[0], tuple(undo[1:])
        _check_takes_key(self.ctx.run_id, name, fn, args)
        registered = _Undo(fn, args)
        self._undos.append(registered)
        return registered

    @property
    def undos(self) -> list:
        """Labels of the steps whose undos are registered, oldest first."""
        return [u.label for u in self._undos if u.label is not None]

    # going back -------------------------------------------------------------------------
    def compensate(self, reason):
        """Run every registered undo, newest first, each as a durable step; then raise
        Compensated (or CompensationFailed if some undo failed for good). Never returns.

        `reason`: the StepFailed that made the run give up, or a sentence of your own.
        """
        ctx = self.ctx
        if self._compensating:
            raise RuntimeError(f"run {ctx.run_id!r}: the saga is already compensating")
        self._compensating = True
        if isinstance(reason, StepFailed):
            failed_step, error = reason.step, reason.error
        else:
            failed_step, error = None, str(reason)
        from .policy import NO_RETRY, Step      # loaded on first use (see policy.py)
        done, failed = [], []
        for undo in reversed(self._undos):
            if undo.label is None:         # its step never took a position: nothing happened
                continue
            spec = Step(undo_name(undo.label), retry=self.undo_retry or NO_RETRY)
            key = ctx.idempotency_key("undo", undo.label)
            try:
                ctx.step(spec, undo.fn, *undo.args, idempotency_key=key)
            except StepFailed as broken:
                failed.append((broken.step, broken.error))
            done.append(ctx.entries[ctx.position - 1].label)
        if failed:
            raise CompensationFailed(ctx.run_id, failed_step, error, done, failed)
        raise Compensated(ctx.run_id, failed_step, error, done)

    # the with block ---------------------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if isinstance(exc, StepFailed) and self.ctx.fatal is None:
            self.compensate(exc)          # raises Compensated or CompensationFailed
        return False                      # anything else goes on its way untouched

    def __repr__(self):
        state = "compensating" if self._compensating else "forward"
        return f"<Saga of run {self.ctx.run_id!r}: {len(self.undos)} undo(s) registered, {state}>"


def undo_name(label: str) -> str:
    """The step name of the undo of the step labelled `label`: "undo:flight", "undo:hotel(2)"."""
    name, _, occurrence = label.partition("#")
    return f"{UNDO_PREFIX}{name}" + (f"({occurrence})" if occurrence else "")


def _name(step) -> str:
    return step if isinstance(step, str) else getattr(step, "name", repr(step))


def _check_takes_key(run_id, name, fn, args):
    """Refuse an undo that cannot be given its idempotency key, when it is registered."""
    import inspect                         # on first use: `import durable_lite` does without it
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):        # a builtin without a signature: trust it
        return
    try:
        signature.bind(*args, idempotency_key="")
    except TypeError as exc:
        fn_name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(
            f"run {run_id!r}: the undo of step {name!r}, {fn_name}(*{args!r}), cannot be called "
            f"with idempotency_key=... ({exc}). An undo runs again after a crash in its window, "
            "so it must take the saga's key and pass it to the provider.") from None
