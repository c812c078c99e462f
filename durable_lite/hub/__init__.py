"""A workshop server: the course for a whole class, in their browsers (`make hub`).

One JupyterHub serves every learner a JupyterLab of their own, set up as `make lab` sets
up one learner's: the lessons read-only, their own `my_work/`, no news pop-up, no update
check. The instructor gets a live view of where the class is, and a button that grades
everyone's work with the trusted grader.

    state      the hub's folder in the course (hub/): its database, the class code, each
               learner's folder; standard library only
    lifeline   run a program that dies with the process that started it
    signin     the class code and a name the learner chooses
    spawner    a learner's server: their folder, the course's JupyterLab options
    config     the JupyterHub configuration, built from the launcher's settings
    launch     `make hub`: start it all, print the two links, stop it all
    classview  the class's progress as a table (what the instructor's page shows)
    service    the instructor's page, a JupyterHub service only admins may open
    grade      copy everyone's my_work/ into class/ and run `make report` on it

Only `state`, `lifeline`, `launch`, `classview` and `grade` are imported outside the hub's
own processes; they use the standard library alone. JupyterHub is imported by the modules
that run inside it, and `make hub` installs it (the `hub` extra) the first time.
"""
