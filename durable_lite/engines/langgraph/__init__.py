"""LangGraph's functional API beside durable_lite (lesson 15, exercise 15): an entrypoint,
tasks and a SQLite checkpointer, and the course's refund ported to it.

    support     a checkpointer opened safely, a workflow bound to it, a thread's state
    worker      a LangGraph worker in a fresh process: a "machine" you can SIGKILL
    faults      the course's three crash points around a LangGraph task
    refund      the refund of lesson 01 and its approval, on LangGraph
    durability  what LangGraph's three durability modes change, measured

A worker names entrypoints as "module.entrypoint", the module one of this subpackage
("refund.refund") or any importable one (a learner's port). Inside it, `import langgraph`
is the real LangGraph: imports in Python 3 are absolute unless written with a dot.
"""
