"""The trace exported as real OpenTelemetry spans, checked with the SDK's in-memory
exporter: one span per tree node, parent/child links, the recorded timestamps, and the
GenAI semantic-convention attributes. The core never imports OpenTelemetry."""

import json
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import durable_lite as dl
from durable_lite import otel
from durable_lite.trace import STEP_SPAN
from trace_support import RUN_ID, lumpy_run


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return lumpy_run(tmp_path_factory.mktemp("lumpy")).engine.trace(RUN_ID)


def exported(tree, seed=RUN_ID, **options):
    memory = InMemorySpanExporter()
    provider = TracerProvider(id_generator=otel.SeededIds(seed))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    count = otel.export(tree, provider, **options)
    spans = memory.get_finished_spans()
    assert count == len(spans)
    return spans


def ns(seconds):
    return round(seconds * 1e9)


def test_every_span_of_the_tree_becomes_one_otel_span_with_its_parent(tree):
    spans = exported(tree)
    nodes = list(tree.walk())
    assert len(spans) == len(nodes)
    # Spans end children first; match them to the tree by start time and name.
    by_key = {(s.start_time, s.name): s for s in spans}
    assert len(by_key) == len(spans)

    def otel_of(node):
        return by_key[(ns(node.start), otel.span_name(node))]

    root = otel_of(tree)
    assert root.parent is None
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    for parent in nodes:
        for child in parent.children:
            assert otel_of(child).parent.span_id == otel_of(parent).context.span_id
    for node in nodes:
        span = otel_of(node)
        assert (span.start_time, span.end_time) == (ns(node.start), ns(node.end))


def test_names_kinds_and_genai_attributes_follow_the_conventions(tree):
    spans = {s.name: s for s in exported(tree)}
    root = spans["invoke_workflow support-agent"]
    assert root.kind == SpanKind.INTERNAL
    assert root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attributes["gen_ai.workflow.name"] == "support-agent"
    assert root.attributes["durable_lite.run.id"] == RUN_ID
    assert root.status.status_code == StatusCode.OK

    draft_node = tree.find(name="draft_reply")[0]
    chat = spans["chat fake-large"]
    assert chat.kind == SpanKind.CLIENT
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "fake-large"
    assert chat.attributes["gen_ai.provider.name"] == "durable_lite.sim"
    assert chat.attributes["gen_ai.usage.input_tokens"] == draft_node.attributes["input_tokens"]
    assert chat.attributes["gen_ai.usage.output_tokens"] == draft_node.attributes["output_tokens"]
    assert chat.attributes["durable_lite.cost_usd"] == pytest.approx(draft_node.cost)

    tool = spans["execute_tool lookup_order"]
    assert tool.kind == SpanKind.INTERNAL
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "lookup_order"
    assert tool.attributes["durable_lite.step.attempts"] == 5

    failed = spans["attempt 1"]
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["error.type"] == "ToolError"
    assert "crm failed" in failed.status.description
    assert spans["attempt 5"].status.status_code == StatusCode.OK

    dead = spans["execution 2"]
    assert dead.attributes["durable_lite.worker"] == "worker-b"
    assert dead.status.status_code == StatusCode.ERROR
    assert dead.attributes["error.type"] == "interrupted"
    assert spans["execution 3"].attributes["durable_lite.execution.status"] == "completed"

    wait = spans["wait approval"]
    assert wait.attributes["durable_lite.parked_seconds"] == 2 * 86400
    assert [e.name for e in wait.events] == ["signal received"]
    assert "gen_ai.operation.name" not in wait.attributes
    # No prompt or answer text leaves the process: content is opt-in in the conventions.
    assert not any("text" in k or "messages" in k for s in spans.values() for k in s.attributes)


def test_seeded_ids_make_the_export_repeatable(tree):
    first = [(s.name, s.context.trace_id, s.context.span_id) for s in exported(tree)]
    again = [(s.name, s.context.trace_id, s.context.span_id) for s in exported(tree)]
    other = [(s.name, s.context.trace_id, s.context.span_id) for s in exported(tree, seed="x")]
    assert first == again and first != other


def test_extra_attributes_are_added_where_the_function_says(tree):
    def conversation(span):
        return {"gen_ai.conversation.id": RUN_ID} if span.kind in (STEP_SPAN,) else {}

    spans = exported(tree, extra_attributes=conversation)
    stamped = {s.name for s in spans if s.attributes.get("gen_ai.conversation.id") == RUN_ID}
    assert stamped == {otel.span_name(s) for s in tree.find(kind=STEP_SPAN)}


def test_format_spans_prints_the_tree_from_parent_ids(tree):
    text = otel.format_spans(exported(tree))
    lines = text.splitlines()
    assert lines[0].startswith("invoke_workflow support-agent  [INTERNAL, OK]  at +0 s, 2 d 0 h 01 m")
    assert "  execution 1  [INTERNAL, UNSET]  at +0 s, 19.2 s" in lines
    assert any(line.startswith("    chat fake-large  [CLIENT, OK]") for line in lines)
    assert any(line.startswith("      attempt 1  [INTERNAL, ERROR]") for line in lines)
    assert "gen_ai.usage.input_tokens=" in text


def test_an_open_run_exports_its_open_spans_to_now():
    clock = dl.FakeClock()
    engine = dl.Engine(dl.MemoryStore(), clock, worker="w")

    @dl.workflow("otel-waiting")
    def waiting(ctx):
        return ctx.wait_for_signal("approval", timeout=86400)

    engine.start(waiting, run_id="o1")
    clock.advance(600)
    spans = {s.name: s for s in exported(engine.trace("o1"))}
    wait = spans["wait approval"]
    assert wait.attributes["durable_lite.open"] is True
    assert wait.end_time - wait.start_time == ns(600)
    assert wait.status.status_code == StatusCode.UNSET


def saga_spans(tmp_path, offers):
    from durable_lite.booking import book_trip
    engine = dl.Engine(dl.MemoryStore(), dl.FakeClock(), worker="w")
    engine.start(book_trip, str(tmp_path / "world"), "trip-1", offers, run_id="t1")
    spans = exported(engine.trace("t1"))
    return {s.name: s for s in spans}, spans


def test_a_compensated_run_is_ok_and_the_step_that_failed_for_good_an_error(tmp_path):
    """Compensated: the trip was not booked, but the saga put the world back as its author
    meant it to: nothing for anyone to fix, so no error status on the run."""
    by_name, spans = saga_spans(tmp_path, ["TP662-flex", "car-compact", "hotel-canal-house"])
    run = by_name["invoke_workflow book-trip"]
    assert run.status.status_code == StatusCode.OK
    assert run.attributes["durable_lite.run.status"] == "compensated"
    assert "error.type" not in run.attributes
    assert by_name["execution 1"].status.status_code == StatusCode.OK
    hotel = by_name["execute_tool hotel"]
    assert hotel.status.status_code == StatusCode.ERROR and hotel.attributes["error.type"] == "Refused"
    undos = [s for s in spans if s.name.startswith("execute_tool undo:")]
    assert len(undos) == 4 and {s.status.status_code for s in undos} == {StatusCode.OK}


def test_an_undo_that_failed_for_good_is_an_error(tmp_path):
    by_name, _ = saga_spans(tmp_path, ["TP662-saver", "hotel-canal-house"])   # saver: no refunds
    run = by_name["invoke_workflow book-trip"]
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["error.type"] == "CompensationFailed"
    assert by_name["execute_tool undo:flight"].status.status_code == StatusCode.ERROR


def test_a_dead_run_is_an_error():
    clock = dl.FakeClock()
    store = dl.MemoryStore()

    @dl.workflow("otel-poison")
    def poison(ctx):
        ctx.step("boom", sys.exit, "the step takes its worker down")

    with pytest.raises(SystemExit):
        dl.Engine(store, clock, worker="a", max_interruptions=1).start(poison, run_id="p")
    assert dl.Engine(store, clock, worker="b", max_interruptions=1).resume("p").status == "dead"
    by_name = {s.name: s for s in exported(dl.Engine(store, clock).trace("p"))}
    for name in ("invoke_workflow otel-poison", "execution 2"):
        assert by_name[name].status.status_code == StatusCode.ERROR
        assert by_name[name].attributes["error.type"] == "dead"
    assert by_name["execution 2"].status.description.startswith("declared dead")
    assert by_name["invoke_workflow otel-poison"].status.description.startswith("dead: its executions")


def test_without_opentelemetry_the_export_says_which_extra_to_install(tree, monkeypatch):
    for name in ("opentelemetry", "opentelemetry.trace"):
        monkeypatch.setitem(sys.modules, name, None)            # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'durable-lite\[trace\]'"):
        otel.export(tree)


def test_the_core_and_the_trace_never_import_opentelemetry():
    probe = """
import json, sys
import durable_lite as dl
engine = dl.Engine(dl.MemoryStore())

@dl.workflow("probe-trace")
def probe(ctx):
    return ctx.step("x", lambda: 1)

engine.start(probe, run_id="p")
engine.trace("p").render()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
