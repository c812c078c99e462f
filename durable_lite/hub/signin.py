"""Signing in to a workshop: the class code, and a name the learner chooses.

A workshop has no accounts to sign in with, and no time to make any. So the hub asks for
two things on its ordinary sign-in page: a name (the learner's choice, the name of their
folder) and the class code the instructor puts on the projector. The first sign-in with a
new name makes that learner; signing in again with the same name, from any browser, finds
the same work. The instructor signs in as `instructor` with a longer code of their own,
which only they have (`make hub` prints it in their terminal), and only that name opens
the class view.

This is JupyterHub's SharedPasswordAuthenticator, which is exactly that rule. What it does
not do: tell two learners apart who choose the same name (they share one folder), or keep
out someone who has the class code and knows a learner's name. A workshop trusts the room;
for anything longer-lived use real accounts (JupyterHub's native, OAuth or LDAP
authenticators).

Run as root, the hub makes each learner a system user of their own the first time they
sign in (`useradd`), so that the operating system keeps learners out of each other's
files: `WorkshopSystemSignIn`.
"""

try:
    from jupyterhub.auth import LocalAuthenticator
    from jupyterhub.authenticators.shared import SharedPasswordAuthenticator
except ImportError as missing:          # this module runs inside the hub
    raise ImportError("durable_lite.hub.signin runs inside JupyterHub: "
                      "pip install 'durable-lite[hub]' (make hub does)") from missing


class WorkshopSignIn(SharedPasswordAuthenticator):
    """A name and the class code; `instructor` and the instructor's code."""


class WorkshopSystemSignIn(LocalAuthenticator, WorkshopSignIn):
    """The same, and each new learner becomes a system user (the hub runs as root)."""
