"""A run's trace as OpenTelemetry spans, named by the GenAI semantic conventions.

`engine.trace(run_id)` builds the tree from the store (trace.py); `export(tree, provider)`
replays it into any OpenTelemetry TracerProvider, with the times the store recorded (a
span that started two days ago starts two days ago), so a run shows up in whatever
tracing backend your team already uses:

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    provider = TracerProvider(id_generator=SeededIds("ticket-1042"))
    provider.add_span_processor(SimpleSpanProcessor(spans))
    export(engine.trace("ticket-1042"), provider)
    print(format_spans(spans.get_finished_spans()))

Names follow the GenAI semantic conventions of OpenTelemetry semconv v1.41.0 (continued
since in the semantic-conventions-genai repository). Every gen_ai.* name there is still
in Development status: the names may change between releases, so pin what you rely on.

    the run         "invoke_workflow {workflow}"  INTERNAL  gen_ai.operation.name=invoke_workflow,
                                                            gen_ai.workflow.name
    an execution    "execution {n}"               INTERNAL  durable_lite.worker, ... (no GenAI name:
                                                            a resume is a durable-execution idea)
    a model call    "chat {model}"                CLIENT    gen_ai.operation.name=chat,
                                                            gen_ai.provider.name, gen_ai.request.model,
                                                            gen_ai.usage.input_tokens / output_tokens
    any other step  "execute_tool {step}"         INTERNAL  gen_ai.operation.name=execute_tool,
                                                            gen_ai.tool.name
    an attempt      "attempt {n}"                 INTERNAL  error.type when it failed
    a wait, sleep   "wait {signal}", "sleep {name}" INTERNAL durable_lite.parked_seconds

Failed, interrupted, diverged and dead spans get status ERROR and `error.type`; dollars and
durable-execution facts go under `durable_lite.*` (the conventions have no cost attribute).
Prompts and answers are not exported: the conventions make content opt-in.

A run a saga compensated (saga.py) ends OK, with `durable_lite.run.status = compensated`:
the business operation did not happen, but nothing is broken and nobody needs to act — the
workflow's own code decided that the refusal ends the run and put the world back. An error
status would page someone for a sold-out hotel; OpenTelemetry's own advice is to mark an
operation OK where its author has validated the outcome, so analysis tools do not count it
as an error. What did break still shows: the step that failed for good is an ERROR span
under the OK run, and an undo that failed for good fails the run (CompensationFailed), so
that run and its undo are ERROR spans.

Only `export` needs OpenTelemetry (`pip install 'durable-lite[trace]'`); it is imported
when called, never by `import durable_lite`.
"""

import random
import re
from types import SimpleNamespace

from .trace import ATTEMPT, EXECUTION, RUN, SLEEP, STEP_SPAN, WAIT, format_duration

SEMCONV_VERSION = "1.41.0"
INSTRUMENTATION = "durable_lite"


def export(tree, tracer_provider=None, *, extra_attributes=None) -> int:
    """Emit every span of `tree` (a `trace.Span`, e.g. `engine.trace(run_id)`) through
    `tracer_provider` (default: OpenTelemetry's global one). Returns how many were emitted.

    extra_attributes: optional `fn(span) -> dict` whose items are added to the attributes
    of that span's OpenTelemetry span: how to carry something this mapping leaves out.
    """
    api = _opentelemetry()
    provider = tracer_provider or api.trace.get_tracer_provider()
    from . import __version__
    tracer = provider.get_tracer(INSTRUMENTATION, __version__)
    return _emit(api, tracer, tree, None, extra_attributes)


def _emit(api, tracer, span, parent, extra) -> int:
    attributes = attributes_for(span)
    if extra is not None:
        attributes.update(extra(span) or {})
    kind = api.SpanKind.CLIENT if span.is_model_call else api.SpanKind.INTERNAL
    context = None if parent is None else api.trace.set_span_in_context(parent)
    otel_span = tracer.start_span(span_name(span), context=context, kind=kind,
                                  attributes=attributes, start_time=_ns(span.start))
    signal_at = span.attributes.get("signal_sent_at")
    if signal_at is not None:
        otel_span.add_event("signal received", {"durable_lite.signal.name": span.name},
                            timestamp=_ns(signal_at))
    if span.status in _ERRORS:
        otel_span.set_status(api.Status(api.StatusCode.ERROR, _error_text(span)))
    elif span.status in _OK:
        otel_span.set_status(api.Status(api.StatusCode.OK))
    count = 1
    for child in span.children:
        count += _emit(api, tracer, child, otel_span, extra)
    otel_span.end(end_time=_ns(span.end))
    return count


_ERRORS = ("failed", "interrupted", "diverged", "dead")
_OK = ("completed", "ok", "signal", "woke", "compensated")   # compensated: see the docstring


def span_name(span) -> str:
    """The OpenTelemetry span name of a trace span, as the conventions spell it."""
    if span.kind == RUN:
        return f"invoke_workflow {span.attributes['workflow']}"
    if span.kind == STEP_SPAN:
        if span.is_model_call:
            model = span.attributes.get("model")
            return f"chat {model}" if model else "chat"
        return f"execute_tool {span.attributes['step']}"
    return f"{span.kind} {span.name}" if span.kind in (WAIT, SLEEP) else span.name


def attributes_for(span) -> dict:
    """The OpenTelemetry attributes of one trace span (see the table in the docstring)."""
    a = span.attributes
    out = {}
    if span.kind == RUN:
        out.update({"gen_ai.operation.name": "invoke_workflow",
                    "gen_ai.workflow.name": a["workflow"],
                    "durable_lite.run.id": span.name, "durable_lite.run.status": span.status,
                    "durable_lite.workflow.version": a["version"],
                    "durable_lite.cost_usd": a["cost"]})
    elif span.kind == EXECUTION:
        out.update({"durable_lite.execution": a["number"], "durable_lite.worker": span.worker,
                    "durable_lite.execution.status": span.status,
                    "durable_lite.execution.replayed": a["replayed"]})
    elif span.kind == STEP_SPAN:
        out.update({"durable_lite.step.position": a["position"],
                    "durable_lite.step.attempts": a["attempts"],
                    "durable_lite.step.status": span.status})
        if span.is_model_call:
            out["gen_ai.operation.name"] = "chat"
            out["gen_ai.provider.name"] = a.get("provider", "_OTHER")
            if a.get("model"):
                out["gen_ai.request.model"] = a["model"]
            for key in ("input_tokens", "output_tokens"):
                if key in a:
                    out[f"gen_ai.usage.{key}"] = a[key]
            out["durable_lite.usage.tokens"] = a["tokens"]
        else:
            out["gen_ai.operation.name"] = "execute_tool"
            out["gen_ai.tool.name"] = a["step"]
        if span.cost:
            out["durable_lite.cost_usd"] = span.cost
    elif span.kind == ATTEMPT:
        out["durable_lite.attempt"] = a["attempt"]
    elif span.kind in (WAIT, SLEEP):
        out["durable_lite.parked_seconds"] = span.duration
        if span.kind == WAIT:
            out["durable_lite.wait.outcome"] = span.status
            out["durable_lite.wait.deadline"] = a["deadline"]
    if span.status in _ERRORS:
        out["error.type"] = _error_type(span)
    if span.open:
        out["durable_lite.open"] = True
    return out


def _error_text(span) -> str:
    if span.status == "interrupted":
        return f"{span.worker or 'the worker'} left no record after this point"
    if span.status == "dead" and not span.attributes.get("error"):
        return "declared dead: its executions kept being interrupted at one position"
    return span.attributes.get("error") or span.status


def _error_type(span) -> str:
    """Low-cardinality, as the conventions ask: the exception's class, not its message."""
    if span.status != "failed":
        return span.status                    # "interrupted", "diverged", "dead"
    error = span.attributes.get("error") or ""
    match = re.match(r"([A-Za-z_][\w.]*)(?::|$)", error)
    return match.group(1) if match else "_OTHER"


def _ns(seconds: float) -> int:
    return round(seconds * 1_000_000_000)


class SeededIds:
    """Trace and span ids drawn from a seed: the same export gives the same ids, so a
    lesson's printed spans do not change between runs. Implements the interface of
    `opentelemetry.sdk.trace.id_generator.IdGenerator`; pass it as
    `TracerProvider(id_generator=SeededIds("..."))`. Not random enough for production
    sampling (`is_trace_id_random()` says so)."""

    def __init__(self, seed):
        self._rng = random.Random(str(seed))

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1          # 0 is OpenTelemetry's "invalid"

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1

    def is_trace_id_random(self) -> bool:
        return False


def format_spans(spans, attributes=("gen_ai.", "error.type")) -> str:
    """Finished OpenTelemetry spans (e.g. `InMemorySpanExporter().get_finished_spans()`)
    as an indented tree built from their parent ids: name, kind, start (seconds after the
    root started), duration, status, and the attributes whose names start with one of
    `attributes`."""
    by_id = {s.context.span_id: s for s in spans}
    children = {}
    roots = []
    for s in sorted(spans, key=lambda s: (s.start_time, -s.end_time)):
        parent = s.parent.span_id if s.parent is not None else None
        (children.setdefault(parent, []) if parent in by_id else roots).append(s)
    lines = []

    def show(s, depth, origin):
        kind = s.kind.name
        status = s.status.status_code.name
        picked = {k: v for k, v in s.attributes.items() if k.startswith(tuple(attributes))}
        text = ", ".join(f"{k}={v!r}" for k, v in picked.items())
        lines.append(f"{'  ' * depth}{s.name}  [{kind}, {status}]  "
                     f"at +{format_duration((s.start_time - origin) / 1e9)}, "
                     f"{format_duration((s.end_time - s.start_time) / 1e9)}"
                     + (f"\n{'  ' * depth}    {text}" if text else ""))
        for child in children.get(s.context.span_id, []):
            show(child, depth + 1, origin)

    for root in roots:
        show(root, 0, root.start_time)
    return "\n".join(lines)


def _opentelemetry():
    """The OpenTelemetry API, or an error that says which extra to install."""
    try:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
    except ImportError as exc:
        raise ImportError("exporting a trace to OpenTelemetry needs the opentelemetry-sdk "
                          "package: pip install 'durable-lite[trace]'") from exc

    return SimpleNamespace(trace=trace, SpanKind=SpanKind, Status=Status, StatusCode=StatusCode)
