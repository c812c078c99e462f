"""The hub's folder in the course, `hub/` (git ignores it): what survives a restart.

    hub/jupyterhub.sqlite     who the learners are, and their servers (JupyterHub's)
    hub/cookie_secret         so a restart does not sign everyone out
    hub/class_code            the code learners sign in with (printed by `make hub`)
    hub/instructor_code       the instructor's, longer: it opens the class view
    hub/users/NAME/           a learner's own course: notebooks/ (the lessons, read-only,
                              a link to the course's), my_work/ (theirs), and
                              my_work/.progress.jsonl (their checks, for the class view)
    hub/run/                  this run's configuration and logs; deleted at the end

Delete `hub/` to start a new class from nothing. Standard library only: the launcher and
the class view read it, and neither needs JupyterHub for that.
"""

import os
import re
import secrets
from pathlib import Path
from typing import List

FOLDER = "hub"
INSTRUCTOR = "instructor"             # the name the instructor signs in with
# A learner's name: lower case, as JupyterHub normalises it, and a valid system user name
# (a hub run as root makes each learner one).
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,30}$")
PROGRESS = ".progress.jsonl"
# A class code is read aloud and typed on a projector's say-so: no 0/o, 1/l look-alikes.
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"


class HubState:
    """The paths of one course's hub folder, and the two codes, made once and kept."""

    def __init__(self, course_root, folder=None):
        self.course = Path(course_root).resolve()
        self.folder = Path(folder).resolve() if folder else self.course / FOLDER
        self.db = self.folder / "jupyterhub.sqlite"
        self.cookie_secret = self.folder / "cookie_secret"
        self.users = self.folder / "users"
        self.run = self.folder / "run"

    def make(self) -> "HubState":
        self.folder.mkdir(parents=True, exist_ok=True)
        self.users.mkdir(exist_ok=True)
        # Learners' servers (their own users, when the hub runs as root) pass through hub/
        # and users/ to their own folder, and read the course's settings in run/, but
        # cannot list hub/ or users/; the hub's files are its own (launch.py sets its umask).
        os.chmod(self.folder, 0o711)
        os.chmod(self.users, 0o711)
        return self

    @property
    def class_code(self) -> str:
        """9 characters, `abcd-efgh`: JupyterHub asks for 8 or more."""
        return self._kept("class_code", lambda: "-".join(
            "".join(secrets.choice(_ALPHABET) for _ in range(4)) for _ in range(2)))

    @property
    def instructor_code(self) -> str:
        """32 characters or more, as JupyterHub asks of an admin's shared password."""
        return self._kept("instructor_code", lambda: secrets.token_urlsafe(30))

    def _kept(self, name: str, make) -> str:
        path = self.folder / name
        try:
            return path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            pass
        code = make()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(code + "\n")
        return code

    def learner(self, name: str) -> Path:
        if not NAME.match(name):
            raise ValueError(f"not a learner's name: {name!r}")
        return self.users / name

    def my_work(self, name: str) -> Path:
        return self.learner(name) / "my_work"

    def progress(self, name: str) -> Path:
        return self.my_work(name) / PROGRESS

    def learners(self) -> List[str]:
        """Every learner who has a folder, by name (the instructor has none)."""
        if not self.users.is_dir():
            return []
        return sorted(p.name for p in self.users.iterdir()
                      if p.is_dir() and NAME.match(p.name) and p.name != INSTRUCTOR)


def prepare_learner(state: HubState, name: str, owner=None) -> Path:
    """Make (or complete) a learner's folder: the lessons linked in, every exercise and the
    playground copied into my_work/ if missing (never over their file). `owner`: (uid, gid)
    of the learner's own system user, who then owns the folder and alone can enter it."""
    from ..lab.workspace import copy_missing_work

    folder = state.learner(name)
    folder.mkdir(parents=True, exist_ok=True)
    lessons = folder / "notebooks"
    if not lessons.is_symlink() and not lessons.exists():
        lessons.symlink_to(state.course / "notebooks", target_is_directory=True)
    # copy_missing_work takes the course as its root and the folder to fill from there
    copy_missing_work(state.course, folder / "my_work")
    if owner is not None:
        uid, gid = owner
        os.chmod(folder, 0o700)
        for top, dirs, files in os.walk(folder):       # does not enter the lessons' link
            for entry in [top] + [os.path.join(top, n) for n in dirs + files]:
                os.chown(entry, uid, gid, follow_symlinks=False)
    return folder
