"""What a graded notebook's code does in its kernel, watched from inside the interpreter: the
key the grader's results are signed with, the grading code as it was before any learner
cell ran, and the operations no answer needs.

The grader's first cell calls `install`, before any learner cell exists. It adds two audit
hooks (PEP 578: the interpreter calls them at every audited event — a file opened, a frame
taken, code compiled, an attribute of a function set, ctypes used — and offers no way to
remove them):

- the *keeper* makes a random key, which `install` hands to the grader once, in the reply
  to that first cell; no cell's source and nothing in IPython's history holds it. It
  records the grading code as loaded — every function, class and method of the course's
  package and of the standard-library modules the checks rely on, every value the grading
  modules keep, every test — and compares it at each checkpoint the grader's `grade` asks
  for (before the tests, after them, and as it signs). It signs a result only for the
  frame running the grader's own `protocol.grade`, with that module's own globals; the
  signature covers what changed and what the watcher saw. The keeper never raises and
  never runs code a notebook could have replaced: it uses the C functions it took when it
  was installed, and looks only at values of exact built-in types.
- the *watcher* refuses, and reports (each a reason to score the question 0, "tampered"):
  writing, renaming, removing or re-stamping a file under the course's package, the
  standard library, site-packages, the kernels' bytecode or the exercises and solutions;
  compiling code under the name of one of those files that is not what the file holds;
  setting an attribute of the grader's functions or classes; adding an audit hook, a trace
  or profile function; listing objects through `gc`; `ctypes`; reading a process's memory.
  It reports without refusing (flags, for a person to look at) reaching into the call
  stack — `sys._getframe`, a traceback's, generator's or coroutine's frame, directly or
  through `inspect` or `traceback` — and starting another process. Nothing here depends
  on the words an answer uses: `getattr(sys, "_get" + "frame")` is `sys._getframe`.

The watch sees only the kernel's own process (what a process the answer starts does is the
job of guard.py and reaper.py), and not everything in it: a signal handler receives the
frame it interrupts with no audited event, and a thread — or a replaced function that puts
the original back before the next checkpoint — can change the grading code between two
looks. docs/grading.md: "How grading works and what it can't stop".
"""

import os
import sys
import sysconfig
import types

SIGN = "durable_lite.sign"               # (payload text, nonce, box): sign, into box
CHECKPOINT = "durable_lite.checkpoint"   # (nonce, box): compare the grading code now
SEEN = "durable_lite.seen"               # (line,): what the watcher saw, for the keeper
TAMPERED, FLAGGED = "tampered", "flagged"

# Standard-library modules the checks and the signing rely on: their functions and classes
# are recorded too (a `sqlite3.connect` that lies about a ledger is a changed function).
STDLIB = ("builtins", "sys", "os", "posixpath", "json", "json.decoder", "json.encoder",
          "hashlib", "hmac", "sqlite3", "sqlite3.dbapi2", "random", "time", "io",
          "contextlib", "functools", "re", "signal", "shutil", "subprocess", "tempfile",
          "pathlib", "inspect", "traceback", "threading", "copy", "dataclasses",
          "collections", "uuid", "datetime", "math")

# What changes while an honest notebook runs: the `input` ipykernel puts in place for every
# cell it runs.
LIVE = {"builtins.input"}


class Refused(RuntimeError):
    """The watcher's refusal (a RuntimeError, as a refusal to add another hook must be)."""


_installed = []


def install(grade_code, protocol_globals, exercise) -> str:
    """Install the keeper and the watcher (once per process); return the key, in hex.

    grade_code, protocol_globals: what the frame asking for a signature must run with.
    exercise: the exercise being graded, whose tests are recorded with the rest."""
    if _installed:
        raise Refused("the grader's watch is installed once per kernel")
    _installed.append(True)
    key = os.urandom(32)
    record = _record(exercise)
    sys.addaudithook(_keeper(key, grade_code, protocol_globals, record))
    sys.addaudithook(_watcher(record))       # after the keeper: it refuses any hook after it
    return key.hex()


# what the grading code is, as loaded ----------------------------------------------------
class _Record:
    """The grading code as loaded: modules by name, and (label, container, key, value,
    code) entries, compared by identity (the values are kept alive, so an id cannot be
    reused); the names each of the course's modules defined that shadow a built-in."""

    def __init__(self):
        self.modules = []           # (name, module)
        self.entries = []           # (label, mapping or list, key, value, code or None)
        self.shadows = []           # (module name, its dict, names it had)
        self.classes = set()        # ids of recorded classes
        self.function_globals = set()   # ids of the course's module dicts


def _record(exercise) -> _Record:
    record = _Record()
    builtin_names = frozenset(vars(sys.modules["builtins"]))
    names = [n for n in list(sys.modules) if n == "durable_lite" or n.startswith("durable_lite.")]
    for name in names + [n for n in STDLIB if n in sys.modules]:
        module = sys.modules[name]
        space = vars(module)
        record.modules.append((name, module))
        ours = name.startswith("durable_lite")
        if ours:
            record.function_globals.add(id(space))
            record.shadows.append((name, space, frozenset(space) & builtin_names))
        for attr, value in list(space.items()):
            label = f"{name}.{attr}"
            if label in LIVE:
                continue
            if type(value) is types.FunctionType:
                record.entries.append((label, space, attr, value, value.__code__))
            elif isinstance(value, type):
                record.entries.append((label, space, attr, value, None))
                record.classes.add(id(value))
                if value.__module__ == name:
                    _record_class(record, label, value)
            elif type(value) is types.BuiltinFunctionType or name.startswith("durable_lite.grading"):
                record.entries.append((label, space, attr, value, None))
    for qid, question in exercise.questions.items():
        label = f"test {qid}"
        record.entries.append((label, exercise.questions, qid, question, None))
        record.entries.append((label, vars(question), "tests", question.tests, None))
        for i, test in enumerate(question.tests):
            record.entries.append((f"{label}: {test.name}", question.tests, i, test, None))
            record.entries.append((f"{label}: {test.name}", vars(test), "fn", test.fn,
                                   getattr(test.fn, "__code__", None)))
    return record


def _record_class(record, label, cls):
    members = vars(cls)
    for attr, member in list(members.items()):
        if type(member) is types.FunctionType:
            record.entries.append((f"{label}.{attr}", members, attr, member, member.__code__))
        elif type(member) in (property, staticmethod, classmethod):
            record.entries.append((f"{label}.{attr}", members, attr, member, None))


def _compare(record, exact_type, identity, length, sys_modules, builtin_names):
    """The function that lists what differs from `record` now. It is made at install time
    from C functions and built-in types only, and looks up nothing a notebook can replace:
    it is what the keeper runs."""
    Function, List, Str, Int = types.FunctionType, list, str, int
    containers = []
    for entry in record.entries:
        if not any(c is entry[1] for c in containers):
            containers.append(entry[1])

    def exact_keys(mapping):
        # A key of another type could compare itself with ours (a `str` subclass, say):
        # only mappings whose keys are all exact strings are looked into.
        for k in mapping:
            if exact_type(k) is not Str and exact_type(k) is not Int:
                return False
        return True

    def changed():
        out = []
        if not exact_keys(sys_modules):
            return ["sys.modules (a name in it is not a string)"]
        for name, module in record.modules:
            if sys_modules.get(name) is not module:
                out.append(name)
        trusted = []
        for container in containers:
            if exact_type(container) is List or exact_keys(container):
                trusted.append(identity(container))
            else:
                out.append("a namespace of the grading code (a name in it is not a string)")
        for label, container, key, value, code in record.entries:
            if identity(container) not in trusted:
                continue
            if exact_type(container) is List:
                now = container[key] if key < length(container) else None
            else:
                now = container.get(key)
            if now is not value:
                out.append(label)
            elif code is not None and exact_type(now) is Function and now.__code__ is not code:
                out.append(label)
        for name, space, names in record.shadows:
            if identity(space) in trusted:
                for builtin in builtin_names:
                    if builtin in space and builtin not in names:
                        out.append(f"{name}.{builtin}")
        return out

    return changed


# the keeper -----------------------------------------------------------------------------
def _keeper(key, grade_code, protocol_globals, record):
    """The audit hook that holds the key, compares the grading code, and signs."""
    import hashlib
    sha256 = hashlib.sha256
    getframe, audit = sys._getframe, sys.audit
    exact_type, identity, length = type, id, len
    Str, Bytes, List = str, bytes, list
    ident = _thread_ident()
    changed = _compare(record, exact_type, identity, length, sys.modules,
                       tuple(vars(sys.modules["builtins"])))
    inner_pad = bytes(b ^ 0x36 for b in key.ljust(64, b"\0"))
    outer_pad = bytes(b ^ 0x5C for b in key.ljust(64, b"\0"))
    seen, looked = [], {}            # lines from the watcher; nonce -> [changes, checkpoints]
    busy = set()
    del key

    def mac(text):
        inner = sha256(inner_pad + text.encode()).digest()
        return sha256(outer_pad + inner).hexdigest()

    def add(line):
        if line not in seen and (length(seen) < 50 or line.startswith(TAMPERED)):
            seen.append(line)

    def from_grade(frame):
        return frame.f_code is grade_code and frame.f_globals is protocol_globals

    def keeper(event, args):
        me = ident()
        if exact_type(event) is not Str or me in busy:
            return
        busy.add(me)
        try:
            if event == SEEN:
                if length(args) == 1 and exact_type(args[0]) is Str:
                    add(args[0])
            elif event == CHECKPOINT:
                if (length(args) == 2 and exact_type(args[0]) is Str
                        and exact_type(args[1]) is List and from_grade(getframe(1))):
                    now = changed()
                    entry = looked.setdefault(args[0], [[], 0])
                    entry[0] += [c for c in now if c not in entry[0]]
                    entry[1] += 1
                    args[1].extend(now)
            elif event == SIGN:
                if not (length(args) == 3 and exact_type(args[0]) is Str
                        and exact_type(args[1]) is Str and exact_type(args[2]) is List):
                    return add(TAMPERED + ": code asked the grader to sign something (refused)")
                if not from_grade(getframe(1)):
                    return add(TAMPERED + ": code asked the grader to sign a result its tests "
                                          "did not make (refused)")
                text, nonce, box = args
                entry = looked.pop(nonce, [[], 0])
                changes = entry[0] + [c for c in changed() if c not in entry[0]]
                if entry[1] < 2:
                    add(TAMPERED + ": its tests were not watched from start to end")
                if changes:
                    add(TAMPERED + ": the grading code in memory was changed ("
                        + ", ".join(changes[:5]) + ")")
                lines = "\n".join(seen)
                seen.clear()
                box.append((text, lines, mac(nonce + "\n" + text + "\n" + lines)))
        except Exception:       # noqa: BLE001 - a keeper that raised would break the kernel
            pass
        finally:
            busy.discard(me)

    return keeper


# the watcher ----------------------------------------------------------------------------
_WRITES = {"os.rename": (0, 1), "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,),
           "os.symlink": (0, 1), "os.link": (0, 1), "os.truncate": (0,), "os.chmod": (0,),
           "os.chown": (0,), "os.utime": (0,), "shutil.rmtree": (0,)}
_FRAMES = ("sys._getframe", "sys._current_frames", "sys._getframemodulename")
_FRAME_ATTRIBUTES = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")
_PROCESSES = ("subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.fork",
              "os.forkpty", "pty.spawn", "os.spawn")
_OBJECT_LISTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def protected_folders() -> tuple:
    """What no code in a graded kernel may write to: where Python and the course's code live,
    the kernels' bytecode, the exercises and solutions."""
    package = _package_folder()
    folders = _python_folders() | {package}
    root = os.path.dirname(package)
    folders |= {os.path.join(root, "exercises"), os.path.join(root, "solutions")}
    if sys.pycache_prefix:
        folders.add(sys.pycache_prefix)
    return _as_prefixes(folders)


def trusted_folders() -> tuple:
    """Where the code that is not the learner's comes from: Python, its packages and the
    course's package. A frame running code from elsewhere — a notebook cell — is the
    learner's."""
    return _as_prefixes(_python_folders() | {_package_folder()}) + ("<frozen ",)


def _python_folders() -> set:
    paths = sysconfig.get_paths()
    folders = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return folders | {p for p in sys.path if p and os.path.basename(p) == "lib-dynload"}


def _package_folder() -> str:
    return os.path.dirname(os.path.abspath(sys.modules["durable_lite"].__file__))


def _as_prefixes(folders) -> tuple:
    out = set()
    for folder in folders:
        out |= {os.path.abspath(folder), os.path.realpath(folder)}
    return tuple(sorted(f.rstrip(os.sep) + os.sep for f in out))


def _watcher(record):
    """The audit hook that refuses and reports. Like the keeper it uses only what it took at
    install time: a notebook that replaces a module's function cannot run code inside it."""
    getframe, audit, getcwd = sys._getframe, sys.audit, os.getcwd
    exact_type, length, identity = type, len, id
    Str, Bytes, Int, Function = str, bytes, int, types.FunctionType
    starts = str.startswith
    sep, writes, write_flags = os.sep, dict(_WRITES), _WRITE_FLAGS
    frames, frame_attributes = _FRAMES, _FRAME_ATTRIBUTES
    processes, object_lists = _PROCESSES, _OBJECT_LISTS
    refusal = Refused
    read_file = _reader()
    protected, trusted = protected_folders(), trusted_folders()
    # The kernels' bytecode folder is written by Python's own import system (the guard
    # checks what it holds after the notebook); by nothing else.
    bytecode = (sys.pycache_prefix.rstrip(sep) + sep,) if sys.pycache_prefix else ()
    importlib_frames = ("<frozen importlib._bootstrap",)
    package = _package_folder() + os.sep
    stdlib = sysconfig.get_paths()["stdlib"] + os.sep
    helpers = (stdlib + "inspect.py", stdlib + "traceback.py")
    ctypes_folder = (stdlib + "ctypes" + os.sep,)
    classes, function_globals = set(record.classes), set(record.function_globals)
    ident = _thread_ident()
    busy = set()

    def text(value):
        return value if exact_type(value) is Str else "(a name that is not a string)"

    def absolute(path):
        if exact_type(path) is Bytes:
            path = path.decode("utf-8", "replace")
        if exact_type(path) is not Str:
            return None
        if not starts(path, sep):
            path = getcwd() + sep + path
        parts = []
        for part in path.split(sep):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return sep + sep.join(parts)

    def is_protected(path, caller=None):
        path = absolute(path)
        if path is None or not starts(path + sep, protected):
            return False
        return not (caller is not None and starts(path, bytecode)
                    and starts(caller.f_code.co_filename, importlib_frames))

    def learner_behind(frame, skip=()):
        """The learner's frame that led here through library frames; None when the course's
        own code (the grader, the engine) did it."""
        while frame is not None:
            name = frame.f_code.co_filename
            if starts(name, package):
                return None
            if not starts(name, trusted) and not starts(name, skip):
                return frame
            frame = frame.f_back
        return None

    def direct_learner(frame, skip):
        while frame is not None and starts(frame.f_code.co_filename, skip):
            frame = frame.f_back
        return frame is not None and not starts(frame.f_code.co_filename, trusted)

    def claims_a_file(filename, source):
        if not is_protected(filename):
            return False
        if exact_type(source) is Str:
            source = source.encode()
        return exact_type(source) is not Bytes or read_file(filename) != source

    def report(level, what):
        audit(SEEN, level + ": " + what)

    def refuse(what):
        report(TAMPERED, "its code " + what + " (refused)")
        return "the grader does not allow this while it grades: " + what

    def check(event, args, caller):
        """Why the event is refused (a message), or None."""
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            if exact_type(path) is Str and starts(path, "/proc/") and path.endswith("/mem"):
                return refuse("read a process's memory (" + path + ")")
            writing = ((exact_type(mode) is Str and ("w" in mode or "a" in mode or "x" in mode
                                                      or "+" in mode))
                       or (mode is None and exact_type(flags) is Int and flags & write_flags))
            if writing and is_protected(path, caller):
                return refuse("wrote to " + absolute(path))
        elif event in writes:
            for i in writes[event]:
                if i < length(args) and is_protected(args[i], caller):
                    return refuse("changed " + absolute(args[i]) + " (" + event + ")")
        elif event == "object.__setattr__":
            target = args[0]
            if identity(target) in classes:
                return refuse("changed the grader's class " + text(target.__name__)
                              + " (its " + text(args[1]) + ")")
            if exact_type(target) is Function and identity(target.__globals__) in function_globals:
                return refuse("changed the grader's function " + text(target.__qualname__)
                              + " (its " + text(args[1]) + ")")
        elif event == "compile":
            if claims_a_file(args[1], args[0]):
                return refuse("compiled code under the name of " + text(args[1]))
        elif event == "code.__new__":
            if length(args) > 1 and is_protected(args[1]) and direct_learner(caller, ()):
                return refuse("made a code object under the name of " + text(args[1]))
        elif event == "marshal.loads" or event == "marshal.load":
            if direct_learner(caller, ()):
                return refuse("loaded code with marshal")
        elif event == "sys.addaudithook":
            return refuse("added an audit hook of its own")
        elif event == "sys.settrace" or event == "sys.setprofile" or starts(event, "sys.monitoring"):
            if learner_behind(caller) is not None:
                kind = "profile" if event == "sys.setprofile" else "trace"
                return refuse("set a " + kind + " function (" + event + ")")
        elif event in object_lists:
            if learner_behind(caller) is not None:
                return refuse("listed the interpreter's objects (" + event + ")")
        elif starts(event, "ctypes."):
            if direct_learner(caller, ctypes_folder):
                return refuse("used ctypes (" + event + ")")
        elif event in frames or (event == "object.__getattr__" and length(args) > 1
                                 and exact_type(args[1]) is Str and args[1] in frame_attributes):
            if direct_learner(caller, helpers):
                shown = event if event in frames else "a frame through ." + args[1]
                report(FLAGGED, "its code reached into the call stack (" + shown + ")")
        elif event in processes:
            if learner_behind(caller) is not None:
                report(FLAGGED, "its code started another process (" + event + "), which "
                                "the grader's watch cannot see into")
        return None

    def watcher(event, args):
        me = ident()
        if exact_type(event) is not Str or me in busy or event == SEEN:
            return
        busy.add(me)
        try:
            why = check(event, args, getframe(1))
        except Exception:       # noqa: BLE001 - a watcher that broke must not break the kernel
            why = None
        finally:
            busy.discard(me)
        if why is not None:
            raise refusal(why)

    return watcher


def _reader():
    """Read a file's bytes with the os module's C functions (taken now)."""
    open_, read, close, fstat, read_only = os.open, os.read, os.close, os.fstat, os.O_RDONLY
    OSError_ = OSError

    def read_file(path):
        try:
            fd = open_(path, read_only)
        except OSError_:
            return None
        try:
            chunks, size = [], fstat(fd).st_size
            while True:
                chunk = read(fd, size + 65536)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        finally:
            close(fd)
    return read_file


def _thread_ident():
    import _thread
    return _thread.get_ident
