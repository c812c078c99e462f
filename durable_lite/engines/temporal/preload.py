"""What multiprocessing's fork server imports once, ahead of every Temporal worker it forks
(worker.py): the SDK, and the course's workflows every worker registers. Imported in each
worker instead, it cost about 0.3 s of CPU per worker, more than the worker's own work in a
short crash test.

Importing the SDK starts no thread (its native runtime starts with the first client, in
the worker), so forking after it is safe.
"""

import temporalio.client  # noqa: F401
import temporalio.worker  # noqa: F401

from . import faults, pitfalls, refund, support, worker  # noqa: F401
