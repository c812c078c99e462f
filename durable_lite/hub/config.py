"""The JupyterHub configuration of `make hub`, built from the launcher's settings.

The launcher writes a two-line `jupyterhub_config.py` into hub/run/ that calls
`configure(c, settings)`; the settings (ports, folders, codes) are the launcher's choice,
and everything JupyterHub should do differently from its defaults is said here, once:

- where its state lives (hub/, so a restart keeps the learners and their work);
- who may sign in (signin.py) and what their server is (spawner.py);
- that every process it starts runs through `lifeline`, so none outlives a killed hub;
- two services: `idle-culler` (jupyterhub-idle-culler) stops a learner's server after
  `cull_seconds` without activity, freeing its memory; their work is saved, and the next
  visit starts the server again. `class` is the instructor's page (service.py).
"""

import sys

LIFELINE = [sys.executable, "-m", "durable_lite.hub.lifeline"]
SIGN_IN = ("Username: a name of your choice (small letters, digits, - or _), the same each "
           "time. Password: the class code on the projector.")


def configure(c, settings: dict) -> None:
    """Fill JupyterHub's config object `c` from the launcher's `settings`."""
    from .state import INSTRUCTOR, HubState

    state = HubState(settings["course"], settings["hub_folder"])
    separate = bool(settings.get("separate_users"))

    # where it listens: the proxy (what learners open) on settings["ip"]; the hub's own
    # API and the proxy's API only on this machine
    c.JupyterHub.ip = settings["ip"]
    c.JupyterHub.port = settings["port"]
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = settings["hub_port"]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings['proxy_api_port']}"
    c.ConfigurableHTTPProxy.auth_token = settings["proxy_token"]
    # the proxy from PyPI (a Python one: no Node needed), through the lifeline
    c.ConfigurableHTTPProxy.command = LIFELINE + ["configurable_http_proxy.cli:main"]
    c.ConfigurableHTTPProxy.pid_file = str(state.run / "proxy.pid")

    # what survives a restart
    c.JupyterHub.db_url = f"sqlite:///{state.db}"
    c.JupyterHub.cookie_secret_file = str(state.cookie_secret)
    c.JupyterHub.pid_file = str(state.run / "hub.pid")
    c.JupyterHub.cleanup_servers = True       # a stopped hub stops every learner's server

    # who signs in
    c.JupyterHub.authenticator_class = ("durable_lite.hub.signin.WorkshopSystemSignIn"
                                        if separate else "durable_lite.hub.signin.WorkshopSignIn")
    c.SharedPasswordAuthenticator.user_password = state.class_code
    c.SharedPasswordAuthenticator.admin_password = state.instructor_code
    c.Authenticator.admin_users = {INSTRUCTOR}
    c.Authenticator.allow_all = True
    c.Authenticator.username_pattern = r"^[a-z][a-z0-9_-]{0,30}$"
    if separate:
        c.LocalAuthenticator.create_system_users = True
    # JupyterHub's own sign-in page says "Username" and "Password": say what goes in them
    c.JupyterHub.template_vars = {"announcement_login": SIGN_IN}

    # where signing in leads: a learner to their server (lesson 00), the instructor, who
    # needs no server of their own, to the class view
    c.JupyterHub.default_url = _landing
    # what they get
    c.JupyterHub.spawner_class = "durable_lite.hub.spawner.CourseSpawner"
    c.CourseSpawner.course_root = str(state.course)
    c.CourseSpawner.hub_folder = str(state.folder)
    c.CourseSpawner.lab_config = settings["lab_config"]
    c.CourseSpawner.separate_users = separate
    c.Spawner.args = list(settings.get("lab_args") or [])
    # a first start on a busy machine builds JupyterLab's caches: give it time
    c.Spawner.start_timeout = 180
    c.Spawner.http_timeout = 180

    # the services
    c.JupyterHub.services = [
        {"name": "idle-culler",
         "command": LIFELINE + ["jupyterhub_idle_culler",
                                f"--timeout={int(settings['cull_seconds'])}",
                                f"--cull-every={max(10, int(settings['cull_seconds']) // 10)}"]},
        {"name": "class",
         "url": f"http://127.0.0.1:{settings['class_port']}",
         "command": LIFELINE + ["durable_lite.hub.service"],
         "cwd": str(state.course),
         "oauth_no_confirm": True,
         "environment": {"DURABLE_LITE_COURSE": str(state.course),
                         "DURABLE_LITE_HUB_FOLDER": str(state.folder),
                         "DURABLE_LITE_GRADING_FOLDER": settings.get("grading_folder")
                         or str(state.course)}},
    ]
    c.JupyterHub.load_roles = [
        {"name": "idle-culler", "services": ["idle-culler"],
         "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
    ]
    c.JupyterHub.log_level = settings.get("log_level", "INFO")


def _landing(handler) -> str:
    from .state import INSTRUCTOR
    user = handler.current_user
    return "/services/class/" if user is not None and user.name == INSTRUCTOR else "/hub/spawn"
