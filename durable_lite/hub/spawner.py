"""A learner's server: JupyterLab on the learner's own folder, set up as `make lab` sets
up one learner's.

Each learner's folder (state.prepare_learner) holds the lessons, linked from the course
and served read-only, and their own my_work/ with every exercise and the crash playground.
Their server starts there, opens lesson 00, and runs with the course's JupyterLab options
(lab/launch.py: read-only lessons, no news, no update check) and the course's default
settings. Two more things set it apart from JupyterHub's usual server:

- it runs through `lifeline`, so it ends if the hub is killed without a chance to stop it;
- its kernels record each check the learner runs (grading/progress.py) in a file in their
  my_work/, which the instructor's class view reads.

Who the server runs as: with `separate_users` (the hub runs as root), the learner's own
system user, in their own folder that only they can enter. Without it, the hub's own user;
then learners are kept apart only by JupyterHub, which lets each learner's browser reach
their own server alone, while code a learner runs could read any file that user can,
other learners' folders included (the README says so).
"""

import os
import sys

try:
    from jupyterhub.spawner import LocalProcessSpawner
    from traitlets import Bool, Unicode, default
except ImportError as missing:          # this module runs inside the hub
    raise ImportError("durable_lite.hub.spawner runs inside JupyterHub: "
                      "pip install 'durable-lite[hub]' (make hub does)") from missing

from ..grading.progress import VARIABLE
from ..lab.launch import LESSON, course_options
from .state import HubState, prepare_learner


class CourseSpawner(LocalProcessSpawner):
    """JupyterHub's local-process spawner, on the learner's folder of the course."""

    course_root = Unicode(config=True, help="The course folder (the clone).")
    hub_folder = Unicode(config=True, help="The hub's state folder (state.HubState).")
    lab_config = Unicode(config=True, help=(
        "A folder added to JUPYTER_CONFIG_PATH holding the course's JupyterLab defaults "
        "(lab/launch.py course_environment)."))
    separate_users = Bool(False, config=True, help=(
        "Run each learner's server as a system user of their own (the hub runs as root)."))

    @property
    def state(self) -> HubState:
        return HubState(self.course_root, self.hub_folder)

    @property
    def folder(self) -> str:
        return str(self.state.learner(self.user.name))

    @default("cmd")
    def _default_cmd(self):
        return [sys.executable, "-m", "durable_lite.hub.lifeline", "jupyterhub.singleuser"]

    @default("default_url")
    def _default_default_url(self):
        return f"/lab/tree/{LESSON}"

    @default("notebook_dir")
    def _default_notebook_dir(self):
        return self.folder

    def get_args(self):
        args = super().get_args() + course_options()
        if os.geteuid() == 0 and not self.separate_users:
            args.append("--allow-root")     # learners share the hub's user, and that is root
        return args

    async def start(self):
        owner = None
        if self.separate_users:
            import pwd
            entry = pwd.getpwnam(self.user.name)
            owner = (entry.pw_uid, entry.pw_gid)
        prepare_learner(self.state, self.user.name, owner)
        return await super().start()

    def make_preexec_fn(self, name):
        if self.separate_users:
            return super().make_preexec_fn(name)      # become the learner, go home
        folder = self.folder

        def preexec():
            os.chdir(folder)
        return preexec

    def user_env(self, env):
        if self.separate_users:
            env = super().user_env(env)               # HOME, SHELL of the learner's user
        else:
            env.update(USER=self.user.name, HOME=self.folder)
        env[VARIABLE] = str(self.state.progress(self.user.name))
        env["JUPYTER_CONFIG_PATH"] = self.lab_config
        return env
