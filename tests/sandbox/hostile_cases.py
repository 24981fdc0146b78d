"""Hostile snippets for tests/sandbox/test_hostile.py: data only.

Every snippet tries to reach a goal OUTSIDE the sandbox (a host file, a host secret, a host
listener, a host process that outlives the session, the bridge without the token) and RAISES when
the goal was not reached, so "contained" reads the same everywhere: the round does not end ``ok``
(an exception, or a kill by the limits) and the host-side oracles in the test see nothing.

Placeholders, replaced by the test before running a snippet:

``$SECRET_NAME``/``$SECRET``   an environment variable set in the test process (and its value)
``$SECRET_FILE``               a world-readable host file holding ``$SECRET``, outside the work dir
``$HOST_DIR``                  a world-writable host directory (so only isolation can stop a write);
                               both live under /var/tmp, which no sandbox has as a writable place
``$PY_PREFIX``                 the host interpreter's installation prefix (bound read-only by bubblewrap)
``$REPO``                      the repository checkout
``$HOME``                      the host user's home directory
``$PORT``                      a TCP listener of the test on 0.0.0.0 (includes 127.0.0.1)
``$HOST_IP``                   a non-loopback address of the host (or 127.0.0.1)
``$MARKER``                    a unique word: a host process whose command line carries it is a leak

Sources for the introspection cases: the public RestrictedPython advisories (attribute access
through ``str.format``/``format_map``, frame walking through generators, coroutines and
tracebacks) and the smolagents LocalPythonExecutor escapes (dunder chains and module attributes
of allowed modules, ``__subclasses__``, ``asyncio`` subprocess helpers).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

__all__ = ["CASES", "HostileCase"]


@dataclass(frozen=True, kw_only=True)
class HostileCase:
    """One attack.

    Attributes:
        id: The pytest id.
        category: files-read, files-write, env, network, process, introspection, import,
            exhaustion or bridge.
        code: The snippet (with placeholders).
        may_finish: The round may end ``ok`` (the attack runs harmlessly inside the sandbox, e.g.
            an output flood that is capped); the oracles still apply.
        exhausting: Runs under the short deadline.
        fresh: Needs its own sandbox, closed before the oracles run (background processes).
        refused: A limit must refuse the attack early: the round ends with an error (or, in a
            container, the memory limit's kill), not by the deadline (fork bombs and spawn storms
            meet ``pids.max``/``RLIMIT_NPROC``, not the clock).
        round_reaps: Nothing the round started may be alive right after it, the sandbox still open.
    """

    id: str
    category: str
    code: str
    may_finish: bool = False
    exhausting: bool = False
    fresh: bool = False
    refused: bool = False
    round_reaps: bool = False


def _dedent(code: str) -> str:
    return textwrap.dedent(code).strip() + "\n"


# A helper prepended to the bridge cases: every Unix socket path the snippet can find.
_FIND_SOCKETS = """
import os, stat
def _sockets():
    found = []
    roots = ['/opt/codeact', '/tmp', '/run', '/var/run', '/work', '..', '.', '/']
    try:
        roots += [a for a in open('/proc/self/cmdline').read().split('\\0') if a.startswith('/')]
    except OSError:
        pass
    for root in roots:
        for base, dirs, files in os.walk(root):
            if base.startswith(('/proc', '/sys', '/usr', '/dev')):
                dirs[:] = []
                continue
            for name in files:
                path = os.path.join(base, name)
                try:
                    if stat.S_ISSOCK(os.stat(path).st_mode):
                        found.append(path)
                except OSError:
                    pass
            if base.count('/') > 6:
                dirs[:] = []
    return sorted(set(found))
"""

CASES: tuple[HostileCase, ...] = (
    # --- reading files outside the work dir ------------------------------------------------------
    HostileCase(
        id="read-etc-shadow",
        category="files-read",
        code="data = open('/etc/shadow').read()\nassert 'root:' in data\nprint('ESCAPED', data[:40])",
    ),
    HostileCase(
        id="list-root-home",
        category="files-read",
        # The interpreter's own install may live under /root (pyenv): anything else there is a leak.
        code=(
            "import os\nnames = [n for n in os.listdir('/root') if not '$PY_PREFIX'.startswith('/root/' + n + '/')]\n"
            "assert names\nprint('ESCAPED', names)"
        ),
    ),
    HostileCase(
        id="read-repo-file",
        category="files-read",
        code="text = open('$REPO/pyproject.toml').read()\nassert 'codeact' in text\nprint('ESCAPED', text[:60])",
    ),
    HostileCase(
        id="read-proc1-environ",
        category="files-read",
        code="env = open('/proc/1/environ', 'rb').read()\nassert b'$SECRET_NAME' in env\nprint('ESCAPED', env)",
    ),
    HostileCase(
        id="read-host-secret-file",
        category="files-read",
        code="print('ESCAPED', open('$SECRET_FILE').read())",
    ),
    HostileCase(
        id="read-host-secret-os-open",
        category="files-read",
        code="import os\nfd = os.open('$SECRET_FILE', os.O_RDONLY)\nprint('ESCAPED', os.read(fd, 100))",
    ),
    HostileCase(
        id="read-via-proc1-root",
        category="files-read",
        code="print('ESCAPED', open('/proc/1/root$SECRET_FILE').read())",
    ),
    HostileCase(
        id="read-via-symlink",
        category="files-read",
        code="import os\nos.symlink('$SECRET_FILE', 'link')\nprint('ESCAPED', open('link').read())",
    ),
    HostileCase(
        id="read-host-home",
        category="files-read",
        code=(
            "import os\nnames = [n for n in os.listdir('$HOME') if not '$PY_PREFIX'.startswith('$HOME/' + n + '/')]\n"
            "assert names\nprint('ESCAPED', names)"
        ),
    ),
    HostileCase(
        id="walk-up-from-workdir",
        category="files-read",
        code=(
            "import os\nfound = []\nfor base, dirs, files in os.walk('/'):\n"
            "    if base.startswith(('/proc', '/sys', '/usr', '/lib', '/dev')):\n        dirs[:] = []\n"
            "    found += [os.path.join(base, f) for f in files if f == '$SECRET_FILE'.rsplit('/', 1)[1]]\n"
            "print('ESCAPED', open(found[0]).read())"
        ),
    ),
    # --- writing outside the work dir ------------------------------------------------------------
    HostileCase(
        id="write-host-dir",
        category="files-write",
        code="open('$HOST_DIR/pwned', 'w').write('x')\nprint('ESCAPED')",
    ),
    HostileCase(
        id="write-etc",
        category="files-write",
        code="open('/etc/codeact-pwned-$MARKER', 'w').write('x')\nprint('ESCAPED')",
    ),
    HostileCase(
        id="write-repo",
        category="files-write",
        code="open('$REPO/PWNED-$MARKER', 'w').write('x')\nprint('ESCAPED')",
    ),
    HostileCase(
        id="mkdir-host-dir",
        category="files-write",
        code="import os\nos.makedirs('$HOST_DIR/sub/dir')\nprint('ESCAPED')",
    ),
    HostileCase(
        id="write-tmp-stays-private",
        category="files-write",
        # Writing the sandbox's own /tmp may succeed; the host's /tmp must not see it.
        code="open('/tmp/codeact-pwned-$MARKER', 'w').write('x')",
        may_finish=True,
    ),
    # --- host environment secrets -----------------------------------------------------------------
    HostileCase(
        id="env-os-environ",
        category="env",
        code="import os\nprint('ESCAPED', os.environ['$SECRET_NAME'])",
    ),
    HostileCase(
        id="env-proc-self",
        category="env",
        code="env = open('/proc/self/environ', 'rb').read()\nassert b'$SECRET_NAME' in env\nprint('ESCAPED', env)",
    ),
    HostileCase(
        id="env-proc-parent",
        category="env",
        code=(
            "import os\nenv = open(f'/proc/{os.getppid()}/environ', 'rb').read()\n"
            "assert b'$SECRET_NAME' in env\nprint('ESCAPED', env)"
        ),
    ),
    HostileCase(
        id="env-scan-all-procs",
        category="env",
        code=(
            "import os\nhits = []\nfor pid in os.listdir('/proc'):\n    try:\n"
            "        env = open(f'/proc/{pid}/environ', 'rb').read()\n    except (OSError, ValueError):\n"
            "        continue\n    if b'$SECRET_NAME' in env:\n        hits.append(env)\n"
            "assert hits\nprint('ESCAPED', hits[0])"
        ),
    ),
    # --- network egress ---------------------------------------------------------------------------
    HostileCase(
        id="net-tcp-loopback",
        category="network",
        code=(
            "import socket\ns = socket.create_connection(('127.0.0.1', $PORT), timeout=2)\n"
            "s.sendall(b'ESCAPED')\nprint('ESCAPED')"
        ),
    ),
    HostileCase(
        id="net-tcp-host-ip",
        category="network",
        code=(
            "import socket\ns = socket.create_connection(('$HOST_IP', $PORT), timeout=2)\n"
            "s.sendall(b'ESCAPED')\nprint('ESCAPED')"
        ),
    ),
    HostileCase(
        id="net-asyncio-connection",
        category="network",
        code=(
            "import asyncio\nreader, writer = await asyncio.wait_for(asyncio.open_connection('127.0.0.1', $PORT), 2)\n"
            "writer.write(b'ESCAPED')\nawait writer.drain()\nprint('ESCAPED')"
        ),
    ),
    HostileCase(
        id="net-urllib",
        category="network",
        code="import urllib.request\nurllib.request.urlopen('http://127.0.0.1:$PORT/', timeout=2)\nprint('ESCAPED')",
    ),
    HostileCase(
        id="net-dns",
        category="network",
        code="import socket\nprint('ESCAPED', socket.getaddrinfo('example.com', 80))",
    ),
    # --- spawning processes -----------------------------------------------------------------------
    HostileCase(
        id="proc-subprocess-cat",
        category="process",
        code=(
            "import subprocess\nout = subprocess.run(['cat', '$SECRET_FILE'], capture_output=True, check=True).stdout\n"
            "print('ESCAPED', out)"
        ),
    ),
    HostileCase(
        id="proc-os-system",
        category="process",
        code="import os\nassert os.system('echo x > $HOST_DIR/pwned') == 0\nprint('ESCAPED')",
    ),
    HostileCase(
        id="proc-asyncio-subprocess",
        category="process",
        code=(
            "import asyncio\n"
            "p = await asyncio.create_subprocess_exec('cat', '$SECRET_FILE', stdout=asyncio.subprocess.PIPE)\n"
            "out, _ = await p.communicate()\nassert p.returncode == 0\nprint('ESCAPED', out)"
        ),
    ),
    HostileCase(
        id="proc-os-fork",
        category="process",
        code=(
            "import os\npid = os.fork()\nif pid == 0:\n    try:\n        open('$HOST_DIR/pwned', 'w').write('x')\n"
            "    finally:\n        os._exit(0)\nos.waitpid(pid, 0)\n"
            "assert os.path.exists('$HOST_DIR/pwned')\nprint('ESCAPED')"
        ),
    ),
    HostileCase(
        id="proc-outlives-session",
        category="process",
        # A detached process must die with the sandbox: the test looks for $MARKER after close().
        code=(
            "import subprocess\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 300; : $MARKER'], start_new_session=True,\n"
            "    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "raise RuntimeError('spawned; the host checks whether it survives')"
        ),
        fresh=True,
    ),
    # --- process and thread bombs: refused by the process wall (pids.max), none outlives the round -
    HostileCase(
        id="proc-fork-bomb-sleepers",
        category="process",
        # The fork bomb: 80 forks, each child sleeping (named $MARKER so the host can see it).
        code=_dedent(
            """
            import os, time
            pids = []
            for _ in range(80):
                pid = os.fork()
                if pid == 0:
                    try:
                        import ctypes
                        ctypes.CDLL(None).prctl(15, b'$MARKER', 0, 0, 0)
                    except Exception:
                        pass
                    time.sleep(3600)
                    os._exit(0)
                pids.append(pid)
            print('ESCAPED', len(pids), 'sleeping children')
            """
        ),
        fresh=True,
        refused=True,
        round_reaps=True,
    ),
    HostileCase(
        id="proc-spawn-storm",
        category="process",
        code=_dedent(
            """
            import subprocess
            procs = []
            for _ in range(80):
                procs.append(subprocess.Popen(['/bin/sh', '-c', 'sleep 3600; : $MARKER'],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
            print('ESCAPED', len(procs), 'processes')
            """
        ),
        fresh=True,
        refused=True,
        round_reaps=True,
    ),
    HostileCase(
        id="proc-thread-bomb-sleepers",
        category="process",
        code=_dedent(
            """
            import threading, time
            threads = []
            for _ in range(2000):
                t = threading.Thread(target=time.sleep, args=(3600,), daemon=True)
                t.start()
                threads.append(t)
            print('ESCAPED', len(threads), 'threads')
            """
        ),
        fresh=True,
        refused=True,
    ),
    HostileCase(
        id="proc-detached-outlives-round",
        category="process",
        # A few double-forked, session-leading sleepers, then a normal end: none may see the next round.
        code=_dedent(
            """
            import os, time
            for _ in range(3):
                if os.fork() == 0:
                    os.setsid()
                    if os.fork() == 0:
                        os.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 3600; : $MARKER'])
                    os._exit(0)
            time.sleep(0.5)
            print('started three detached sleepers')
            """
        ),
        may_finish=True,
        fresh=True,
        round_reaps=True,
    ),
    # --- introspection escapes (RestrictedPython / smolagents advisories) -------------------------
    HostileCase(
        id="intro-subclasses-wrap-close",
        category="introspection",
        code=(
            "cls = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]\n"
            "print('ESCAPED', cls.__init__.__globals__['environ']['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-format-string-globals",
        category="introspection",
        code=(
            "import uuid\n"
            "print('ESCAPED', '{0.__init__.__globals__[os].environ[$SECRET_NAME]}'.format(uuid.UUID(int=0)))"
        ),
    ),
    HostileCase(
        id="intro-format-map-class",
        category="introspection",
        code=(
            "import uuid\n"
            "print('ESCAPED', '{x.__init__.__globals__[os].environ[$SECRET_NAME]}'.format_map({'x': uuid.UUID(int=0)}))"
        ),
    ),
    HostileCase(
        id="intro-generator-frame",
        category="introspection",
        code=(
            "def gen():\n    yield 1\ng = gen()\nb = g.gi_frame.f_builtins\n"
            "print('ESCAPED', b['__import__']('os').environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-generator-expression-frame-back",
        category="introspection",
        code=(
            "g = (x for x in [1])\nnext(g)\nf = g.gi_frame\nwhile f.f_back is not None:\n    f = f.f_back\n"
            "print('ESCAPED', f.f_builtins['__import__']('os').environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-coroutine-frame",
        category="introspection",
        code=(
            "async def c():\n    pass\nco = c()\ng = co.cr_frame.f_globals\nco.close()\n"
            "print('ESCAPED', g['__builtins__']['__import__']('os').environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-async-generator-frame",
        category="introspection",
        code=(
            "async def ag():\n    yield 1\na = ag()\nb = a.ag_frame.f_builtins\n"
            "print('ESCAPED', b['__import__']('os').environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-traceback-frame",
        category="introspection",
        code=(
            "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    f = e.__traceback__.tb_frame\n"
            "print('ESCAPED', f.f_builtins['__import__']('os').environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-function-globals",
        category="introspection",
        code=(
            "def f():\n    pass\nb = f.__globals__['__builtins__']\nimp = b['__import__'] if isinstance(b, dict) "
            "else b.__import__\nprint('ESCAPED', imp('os').environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-getattr-string-dunder",
        category="introspection",
        code=(
            "subs = getattr(getattr(getattr((), '__class__'), '__base__'), '__subclasses__')()\n"
            "w = [c for c in subs if c.__name__ == '_wrap_close'][0]\n"
            "print('ESCAPED', getattr(w.__init__, '__globals__')['environ']['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-operator-attrgetter",
        category="introspection",
        code=(
            "import operator, uuid\nos_ = operator.attrgetter('__init__.__globals__')(uuid.UUID)['os']\n"
            "print('ESCAPED', os_.environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-module-attribute-chain",
        category="introspection",
        code="import dataclasses\nprint('ESCAPED', dataclasses.sys.modules['os'].environ['$SECRET_NAME'])",
    ),
    HostileCase(
        id="intro-asyncio-shell",
        category="introspection",
        code=(
            "import asyncio\np = await asyncio.create_subprocess_shell('cat $SECRET_FILE', stdout=-1)\n"
            "out, _ = await p.communicate()\nassert p.returncode == 0\nprint('ESCAPED', out)"
        ),
    ),
    HostileCase(
        id="intro-builtins-dict",
        category="introspection",
        code=(
            "b = __builtins__\nimp = b['__import__'] if isinstance(b, dict) else b.__import__\n"
            "print('ESCAPED', imp('os').environ['$SECRET_NAME'])"
        ),
    ),
    # --- the constructs real model code needs, turned against the policy -------------------------
    HostileCase(
        id="intro-star-import-asyncio-shell",
        category="introspection",
        code=(
            "from asyncio import *\np = await create_subprocess_shell('cat $SECRET_FILE', stdout=-1)\n"
            "out, _ = await p.communicate()\nassert p.returncode == 0\nprint('ESCAPED', out)"
        ),
    ),
    HostileCase(
        id="intro-private-attribute-of-stdlib-base",
        category="introspection",
        # A subclass of a stdlib class: its private attributes (the loop's self-pipe socket) are not the code's.
        code=(
            "import asyncio\nclass L(asyncio.SelectorEventLoop):\n    pass\nloop = L()\n"
            "s = type(loop._ssock)(2, 1)\ns.settimeout(2)\ns.connect(('$HOST_IP', $PORT))\nprint('ESCAPED', s)"
        ),
    ),
    HostileCase(
        id="intro-match-class-keyword-dunder",
        category="introspection",
        code=(
            "def f():\n    pass\nmatch f:\n    case object(__globals__=g):\n        b = g['__builtins__']\n"
            "        imp = b['__import__'] if isinstance(b, dict) else b.__import__\n"
            "        print('ESCAPED', imp('os').environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-match-class-module-chain",
        category="introspection",
        # A class pattern reads attributes natively: left raw, it walked from an allowed module to os.
        code=(
            "import dataclasses\nmatch dataclasses:\n"
            "    case object(sys=object(modules={'os': object(environ=env)})):\n"
            "        print('ESCAPED', env['$SECRET_NAME'])\n    case _:\n        raise RuntimeError('no match')"
        ),
    ),
    HostileCase(
        id="intro-match-metaclass-instancecheck",
        category="introspection",
        # A metaclass whose __instancecheck__ says yes makes a module match; __match_args__ names the reads.
        code=(
            "M = type(int)('M', (type(int),), {'__instancecheck__': lambda c, o: True})\n"
            "Any = M('Any', (), {'__match_args__': ('sys',)})\nimport dataclasses\nmatch dataclasses:\n"
            "    case Any(Any(modules={'os': Any(environ=env)})):\n        print('ESCAPED', env['$SECRET_NAME'])\n"
            "    case _:\n        raise RuntimeError('no match')"
        ),
    ),
    HostileCase(
        id="intro-match-value-pattern-eq",
        category="introspection",
        # A value pattern's dotted name, read raw, handed to the subject's __eq__.
        code=(
            "import dataclasses\ngot = []\nclass Grab:\n    def __eq__(self, other):\n        got.append(other)\n"
            "        return False\nmatch Grab():\n    case dataclasses.sys:\n        pass\n"
            "print('ESCAPED', got[0].modules['os'].environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-match-str-format",
        category="introspection",
        # A keyword pattern on str reads the raw str.format, which walks dunder attributes.
        code=(
            "import uuid\nmatch '{0.__init__.__globals__[os].environ[$SECRET_NAME]}':\n    case str(format=fmt):\n"
            "        print('ESCAPED', fmt(uuid.UUID))\n    case _:\n        raise RuntimeError('no match')"
        ),
    ),
    HostileCase(
        id="intro-except-star-traceback",
        category="introspection",
        code=(
            "try:\n    raise ExceptionGroup('g', [ValueError(1)])\nexcept* ValueError as eg:\n"
            "    f = eg.__traceback__.tb_frame\n"
            "    print('ESCAPED', f.f_builtins['__import__']('os').environ['$SECRET_NAME'])"
        ),
    ),
    HostileCase(
        id="intro-private-guard-rebinding",
        category="introspection",
        code=(
            "_getattr_ = getattr\nsubs = ().__class__.__base__.__subclasses__()\n"
            "w = [c for c in subs if c.__name__ == '_wrap_close'][0]\n"
            "print('ESCAPED', w.__init__.__globals__['environ']['$SECRET_NAME'])"
        ),
    ),
    # --- forbidden imports ------------------------------------------------------------------------
    HostileCase(
        id="import-os-environ",
        category="import",
        code="from os import environ\nprint('ESCAPED', environ['$SECRET_NAME'])",
    ),
    HostileCase(
        id="import-dunder-import",
        category="import",
        code="sp = __import__('subprocess')\nprint('ESCAPED', sp.check_output(['cat', '$SECRET_FILE']))",
    ),
    HostileCase(
        id="import-importlib",
        category="import",
        code="import importlib\nprint('ESCAPED', importlib.import_module('os').environ['$SECRET_NAME'])",
    ),
    HostileCase(
        id="import-ctypes-system",
        category="import",
        code=(
            "import ctypes\nrc = ctypes.CDLL(None).system(b'cat $SECRET_FILE > $HOST_DIR/pwned')\n"
            "assert rc == 0\nprint('ESCAPED')"
        ),
    ),
    HostileCase(
        id="import-sys-modules",
        category="import",
        code="import sys\nprint('ESCAPED', sys.modules['os'].environ['$SECRET_NAME'])",
    ),
    # --- resource exhaustion (short deadline) -----------------------------------------------------
    HostileCase(id="exhaust-cpu-loop", category="exhaustion", code="while True:\n    pass", exhausting=True),
    HostileCase(
        id="exhaust-asyncio-sleep",
        category="exhaustion",
        code="import asyncio\nawait asyncio.sleep(3600)",
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-time-sleep",
        category="exhaustion",
        code="import time\ntime.sleep(3600)",
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-sleep-ignoring-exceptions",
        category="exhaustion",
        code=(
            "import asyncio\nwhile True:\n    try:\n        await asyncio.sleep(3600)\n"
            "    except BaseException:\n        pass"
        ),
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-memory-bomb",
        category="exhaustion",
        code="x = bytearray(8 * 1024 ** 3)",
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-memory-growth",
        category="exhaustion",
        code="chunks = []\nwhile True:\n    chunks.append('x' * 10 ** 7)",
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-huge-int",
        category="exhaustion",
        code="x = 10 ** 10 ** 9",
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-fork-bomb",
        category="exhaustion",
        code="import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-thread-bomb",
        category="exhaustion",
        code=(
            "import threading, time\nts = []\nwhile True:\n"
            "    t = threading.Thread(target=time.sleep, args=(3600,), daemon=True)\n    t.start()\n    ts.append(t)"
        ),
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-output-flood",
        category="exhaustion",
        code="for _ in range(20000):\n    print('A' * 1000)",
        exhausting=True,
        may_finish=True,
    ),
    HostileCase(
        id="exhaust-output-flood-forever",
        category="exhaustion",
        code="while True:\n    print('B' * 10000)",
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-disk-fill",
        category="exhaustion",
        code=(
            "with open('fill.bin', 'wb') as f:\n    while True:\n        f.write(b'\\0' * 2 ** 20)\n        f.flush()"
        ),
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-fd-exhaustion",
        category="exhaustion",
        code="import os\n_fds = []\nwhile True:\n    _fds.append(os.open('/dev/null', os.O_RDONLY))",
        exhausting=True,
    ),
    HostileCase(
        id="exhaust-recursion",
        category="exhaustion",
        code="def f(n):\n    return f(n + 1)\nf(0)",
        exhausting=True,
    ),
    # --- forged bridge frames ---------------------------------------------------------------------
    HostileCase(
        id="bridge-connect-wrong-token",
        category="bridge",
        code=_FIND_SOCKETS
        + _dedent(
            r"""
            import socket
            answers = []
            for path in _sockets():
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(2)
                try:
                    s.connect(path)
                    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"forged"}}\n')
                    s.sendall(b'{"jsonrpc":"2.0","id":2,"method":"call","params":{"toolkit":"vault",'
                              b'"operation":"read","arguments":{}}}\n')
                    answers.append(s.recv(65536))
                except OSError:
                    pass
            assert any(b'"result"' in a for a in answers), answers
            print('ESCAPED', answers)
            """
        ),
    ),
    # Host waits are not counted against the round's clock (issue 34): a flood of forged frames on the
    # bridge must still end at the deadline, reach no handler, and leave the sandbox usable.
    HostileCase(
        id="bridge-flood-forged-frames",
        category="bridge",
        exhausting=True,
        code=_FIND_SOCKETS
        + _dedent(
            r"""
            import socket
            frame = b'{"jsonrpc":"2.0","id":1,"method":"call","params":{"toolkit":"vault","operation":"read",' \
                    b'"arguments":{"x":"' + b'y' * 4096 + b'"}}}\n'
            while True:
                for path in _sockets():
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(0.5)
                    try:
                        s.connect(path)
                        for _ in range(100):
                            s.sendall(frame)
                    except OSError:
                        pass
                    finally:
                        s.close()
            """
        ),
    ),
    # Rounds without an await of their own now run without an event loop (issue 38), and a session that
    # moved big frames frees its read buffer at close: oversized frames on the round's own authenticated
    # connection, from such a round, are refused at the frame cap, reach no handler, end at the deadline
    # and leave the sandbox usable (the policy refuses `__self__`; full CPython reaches the socket).
    HostileCase(
        id="bridge-oversize-flood-loop-free",
        category="bridge",
        exhausting=True,
        code=_dedent(
            r"""
            sock = _codeact_sync_.__self__.sock
            head = b'{"jsonrpc":"2.0","id":1,"method":"call","params":{"toolkit":"vault","operation":"read",' \
                   b'"arguments":{"x":"'
            chunk = b'y' * (1024 * 1024)
            while True:
                sock.sendall(head)
                for _ in range(9):  # 9 MiB: over the 8 MiB frame cap
                    sock.sendall(chunk)
                sock.sendall(b'"}}}\n')
            """
        ),
    ),
    # One pipeline handles every toolkit call now (issue 37): a request whose params are not an object
    # skips the host's wrappers (events, log, journal). A flood of such requests on the round's own
    # authenticated connection is refused before any handler: none reached, the round ends at the
    # deadline (host waits are not counted, the flood is), the sandbox usable after.
    HostileCase(
        id="bridge-malformed-call-flood",
        category="bridge",
        exhausting=True,
        code=_dedent(
            r"""
            sock = _codeact_sync_.__self__.sock
            bad = b'{"jsonrpc":"2.0","id":7,"method":"call","params":["vault","read"]}\n'
            nothing = b'{"jsonrpc":"2.0","id":8,"method":"call","params":null}\n'
            while True:
                sock.sendall((bad + nothing) * 200)
            """
        ),
    ),
    HostileCase(
        id="bridge-connect-no-auth-call",
        category="bridge",
        code=_FIND_SOCKETS
        + _dedent(
            r"""
            import socket
            answers = []
            for path in _sockets():
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(2)
                try:
                    s.connect(path)
                    s.sendall(b'{"jsonrpc":"2.0","id":7,"method":"call","params":{"toolkit":"vault",'
                              b'"operation":"read","arguments":{}}}\n')
                    answers.append(s.recv(65536))
                except OSError:
                    pass
            assert any(b'"result"' in a for a in answers), answers
            print('ESCAPED', answers)
            """
        ),
    ),
    HostileCase(
        id="bridge-garbage-on-runtime-connection",
        category="bridge",
        # Full CPython can reach the runtime's own authenticated socket: garbage, an oversized frame,
        # a forged re-auth and a forged answer must neither crash the host nor reach the handler.
        code=_dedent(
            r"""
            import gc, socket
            socks = [o for o in gc.get_objects() if isinstance(o, socket.socket)]
            for s in socks:
                try:
                    s.sendall(b'garbage\n' + b'x' * (9 * 1024 * 1024) + b'\n')
                    s.sendall(b'{"jsonrpc":"2.0","id":99,"method":"auth","params":{"token":"forged"}}\n')
                    s.sendall(b'{"jsonrpc":"2.0","id":12345,"result":{"forged":true}}\n')
                except OSError:
                    pass
            raise RuntimeError(f'sent forged frames on {len(socks)} sockets')
            """
        ),
    ),
)
