"""What runs across engines: the same scenarios on durable_lite, DBOS, Temporal and
LangGraph, compared.

    parity          the same scenarios on every engine, as comparable outcomes
    crash_table     lesson 01's refund killed on four engines, as one table (lesson 15);
                    crash_table.json holds it as measured and committed
    differences     what the engines do differently, recorded rather than skipped
    concepts        the port concept by concept, and the map to six engines
    choosing        lesson 15's decision table, a question a row, an engine a column
    ledger          what the simulated world remembers of a run, read the same way for all
    killed          any workflow SIGKILLed and restarted, on durable_lite and on DBOS
    killed_waiting  the same for a workflow that waits for a reply, on durable_lite,
                    Temporal and LangGraph (exercise 15's checks)
"""
