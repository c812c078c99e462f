"""The instructor's page: the class view, live, and a button that grades everyone.

A JupyterHub service (config.py starts it; the hub routes /services/class/ to it). It
signs its visitors in through the hub (OAuth), and the hub lets only those with access to
this service through: the admins, and the instructor is the only one. A learner who finds
the link gets the hub's "403: Forbidden" and never sees another learner's row.

The page asks for the grid (classview.py) every two seconds, so a check a learner runs
shows within seconds. The button runs grade.py: the trusted grader on every learner's
my_work/, into report/ as `make report` writes it.
"""

import html
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

try:
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import ioloop, web
except ImportError as missing:          # this module runs as a service of the hub
    raise ImportError("durable_lite.hub.service runs as a JupyterHub service: "
                      "pip install 'durable-lite[hub]' (make hub does)") from missing

from ..lab.launch import die_with_parent
from . import grade
from .classview import ClassView
from .state import INSTRUCTOR, HubState

REFRESH_MS = 2000

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>The class</title>
<style>
 body {{ font-family: sans-serif; margin: 1.5em; }}
 table {{ border-collapse: collapse; }}
 th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; font-size: 90%; }}
 td.passed {{ background: #c8f0c8; }}
 td.failing {{ background: #f6c6c6; }}
 td.not-attempted {{ color: #888; }}
</style></head>
<body>
<h1>The class</h1>
<p>Each learner's last check of each question, as their notebooks ran it (refreshed every
{seconds} s). Scores come from the grader: the button grades everyone's my_work/ into
report/, as <code>make report</code> does.</p>
<form method="post" action="{prefix}grade">{xsrf}<button id="grade" type="submit">Grade everyone's
my_work/</button></form>
<div id="view">{view}</div>
<script>
setInterval(async () => {{
  // a fetch, unlike a page view, must show the page's xsrf token (JupyterHub's rule)
  const answer = await fetch("{prefix}view", {{credentials: "same-origin",
                                              headers: {{"X-XSRFToken": "{xsrf_token}"}}}});
  if (answer.ok) document.getElementById("view").innerHTML = await answer.text();
}}, {ms});
</script>
</body></html>
"""


class Grading:
    """The one grading run the page may have going, and what it said."""

    def __init__(self, state: HubState, into: Path):
        self.state, self.into = state, into
        self.process = None
        self.log = state.run / "grade.log"

    def start(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return                                  # one at a time
        self.state.run.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "durable_lite.hub.grade", "--course", str(self.state.course),
                 "--hub-folder", str(self.state.folder), "--into", str(self.into)],
                cwd=self.state.course, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, preexec_fn=die_with_parent)

    def html(self) -> str:
        if self.process is None:
            return ""
        code = self.process.poll()
        said = self.log.read_text(encoding="utf-8", errors="replace")[-3000:] if self.log.exists() else ""
        if code is None:
            return f'<h2>Grading</h2><p id="grading">grading… </p><pre>{html.escape(said)}</pre>'
        summary = self.into / grade.REPORT / "summary.md"
        text = summary.read_text(encoding="utf-8") if code == 0 and summary.exists() else said
        return (f'<h2>Grading</h2><p id="grading">finished (exit code {code}); the report is '
                f"in {html.escape(str(self.into / grade.REPORT))}.</p><pre>{html.escape(text)}</pre>")


class Instructor(HubOAuthenticated, web.RequestHandler):
    """Signed in through the hub, and the instructor (the hub already refused the rest)."""

    def prepare(self):
        # get_current_user is HubOAuthenticated's: a redirect to sign in if nobody is
        user = self.get_current_user()
        if user and user.get("name") != INSTRUCTOR and not user.get("admin"):
            raise web.HTTPError(403)

    @property
    def view(self) -> str:
        return ClassView(self.settings["state"]).html() + self.settings["grading"].html()


class Page(Instructor):
    @web.authenticated
    def get(self):
        self.set_header("Cache-Control", "no-store")
        self.write(PAGE.format(prefix=self.settings["prefix"], view=self.view,
                               xsrf=self.xsrf_form_html(), seconds=REFRESH_MS // 1000,
                               xsrf_token=html.escape(self.xsrf_token.decode()
                                                      if isinstance(self.xsrf_token, bytes)
                                                      else self.xsrf_token),
                               ms=REFRESH_MS))


class View(Instructor):
    @web.authenticated
    def get(self):
        self.set_header("Cache-Control", "no-store")
        self.write(self.view)


class Grade(Instructor):
    @web.authenticated
    def post(self):
        self.settings["grading"].start()
        self.redirect(self.settings["prefix"])


def make_app(state: HubState, prefix: str, into: Path) -> web.Application:
    return web.Application([
        (prefix, Page),
        (url_path_join(prefix, "view"), View),
        (url_path_join(prefix, "grade"), Grade),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=os.urandom(32), state=state, grading=Grading(state, into), prefix=prefix)


def main() -> None:
    state = HubState(os.environ["DURABLE_LITE_COURSE"], os.environ["DURABLE_LITE_HUB_FOLDER"])
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/class/")
    where = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    into = Path(os.environ.get("DURABLE_LITE_GRADING_FOLDER") or state.course)
    make_app(state, prefix, into).listen(where.port, where.hostname or "127.0.0.1")
    try:
        ioloop.IOLoop.current().start()
    except KeyboardInterrupt:               # the hub stopping it (SIGINT): nothing to report
        pass


if __name__ == "__main__":
    main()
