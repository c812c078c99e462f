"""The code notebooks 05 and 07 give the learner, as the tests' answers call it.

Answers written in the tests (right ones and wrong ones) call these, as a learner's cells call
the notebook's own copies; keep them in step with the given cells of solutions/05 and 07.
"""

from durable_lite.examples import world_at

# lesson 05: a support ticket, classified by the model and forwarded to a desk ---------------


def classify(folder, ticket):
    return world_at(folder).llm.complete(f"Classify this support ticket: {ticket}")


def forward(folder, desk, ticket):
    return world_at(folder).mailer.send(f"{desk}@example.com", ticket)


# lesson 07: a post, drafted by the model, approved by an editor or a manager ----------------
HOUR, DAY = 3600, 24 * 3600
EDITOR, MANAGER = "editor@example.com", "manager@example.com"
AUTHOR, READERS = "author@example.com", "readers@example.com"


def write_draft(folder, post_id):
    return world_at(folder).llm.complete(f"Write the blog post {post_id}")


def notify(folder, to, subject):
    return world_at(folder).mailer.send(to, subject)


def publish(folder, post_id, text):
    return world_at(folder).mailer.send(READERS, f"{post_id}: {text[:40]}")
