"""The source review's research workflow on DBOS: the five figures, on a real engine.

retrieval -> extraction (emails the team) -> drafting (fails on its first call) -> deliver,
calling the very same tool functions as durable_lite.examples.research, in the same
simulated world. `deliver` alone is the workflow of figure 5 (50 attempts, 1 delivery).

The drafting nonce is read from `NONCE` when the workflow runs, so a test or a fresh
worker process can change it between executions, as a learner edits a cell (figure 3).
"""

from dbos import DBOS

from ... import examples as ex
from .faults import step

NONCE = {"value": 1}


@step("retrieval")
def retrieval(folder, topic):
    return ex.research_tool(folder, "retrieval", topic)


@step("extraction")
def extraction(folder, docs, to):
    return ex.extract_and_notify(folder, docs, to)


@step("drafting")
def drafting(folder, facts, nonce):
    return ex.draft(folder, facts, nonce)


@step("deliver")
def deliver_report(folder, report):
    return ex.research_tool(folder, "deliver", report)


@DBOS.workflow(name="research")
def research(folder, topic, to="team@example.com"):
    docs = retrieval(folder, topic)
    facts = extraction(folder, docs, to)
    report = drafting(folder, facts, NONCE["value"])
    deliver_report(folder, report["text"])
    return {"topic": topic, "draft": report["text"]}


@DBOS.workflow(name="deliver")
def deliver(folder, report):
    return deliver_report(folder, report)
