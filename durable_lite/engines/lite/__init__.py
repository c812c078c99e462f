"""durable_lite's own side of the ports: the workflows lessons 14 and 15 and their
exercises move to DBOS, Temporal and LangGraph, as they are on durable_lite.

    refund        the refund with an approval and a cooling-off sleep (lessons 14 and 15)
    subscription  two subscription workflows, for exercise 14 to port to DBOS
    renewal       the renewal that waits for a reply, for exercise 15 to port to Temporal
                  and LangGraph
"""
