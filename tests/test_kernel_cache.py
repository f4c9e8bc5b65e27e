"""numba's cache of the kernels, one folder per digest of their sources (crfsdca.kernels.cache):
an edited kernel module is picked up by the next process, whatever was cached before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from numba.core.caching import NullCache
from numba.core.errors import NumbaWarning

from crfsdca.kernels import cache
from crfsdca.kernels.cache import (
    CacheFolder,
    KernelCache,
    cache_root,
    clean_up,
    kernel_cache,
    register,
    sources_fingerprint,
    user_cache_dir,
)
from crfsdca.kernels.structures import chain

ROOT = Path(__file__).resolve().parents[1]

#: a kernel (structures/chain.log_forward) whose callee (numerics/logspace.logsumexp) lives in
#: another module, of another subpackage
RUN_KERNEL = """
import json
import numpy as np
from crfsdca.kernels import cache
from crfsdca.kernels.structures import chain
unary, log_trans = np.arange(12.0).reshape(4, 3) / 7, np.arange(9.0).reshape(3, 3) / 5
log_z = chain.log_forward(unary, log_trans, np.empty((4, 3)), np.empty(4))
stats = chain.log_forward.stats
print(json.dumps({"log_z": log_z, "file": chain.__file__, "folder": str(cache.current().folder),
                  "hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values())}))
"""


def _copy_package(site: Path) -> Path:
    """A copy of the crfsdca package (no compiled files) in the folder ``site``."""
    return Path(shutil.copytree(ROOT / "crfsdca", site / "crfsdca", ignore=_no_caches))


def _no_caches(folder, names):
    return [name for name in names if name == "__pycache__"]


def _edit_callee(package: Path) -> None:
    """logsumexp (the callee of chain.log_forward, in another module) returns 1 more."""
    module = package / "kernels" / "numerics" / "logspace.py"
    text, line = module.read_text(), "    return m + np.log(s)\n"
    assert text.count(line) == 1
    module.write_text(text.replace(line, line.replace("np.log(s)", "np.log(s) + 1.0")))


def _env(site: Path, numba_cache: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    if numba_cache is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_cache)
    env["PYTHONPATH"] = str(site)
    return env


def _start(site: Path, numba_cache: Path | None, code: str = RUN_KERNEL) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=site,  # first on sys.path
        env=_env(site, numba_cache),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return json.loads(out.splitlines()[-1])


def _run(site: Path, numba_cache: Path | None) -> dict:
    return _result(_start(site, numba_cache))


@pytest.mark.parametrize("where", ["next to the sources", "NUMBA_CACHE_DIR"])
def test_an_edited_callee_in_another_module_runs_in_the_next_process(tmp_path, where):
    """Run a kernel, run it again (from the cache), edit its callee in another module: the next
    process runs the edited code (the value of a run on an empty cache), though numba alone
    would load the cached kernel, whose own file did not change; the old folder is removed."""
    site = tmp_path / "site"
    package = _copy_package(site)
    numba_cache = tmp_path / "numba" if where == "NUMBA_CACHE_DIR" else None
    first = _run(site, numba_cache)
    assert first["file"] == str(package / "kernels" / "structures" / "chain.py")
    assert Path(first["folder"]).parent == cache_root(package, str(numba_cache or ""))
    assert (first["hits"], first["misses"]) == (0, 1)
    again = _run(site, numba_cache)
    assert (again["log_z"], again["hits"], again["misses"]) == (first["log_z"], 1, 0)
    _edit_callee(package)
    edited = _run(site, numba_cache)
    fresh = _run(site, tmp_path / "empty")  # the edited sources compiled on an empty cache
    assert edited["log_z"] == fresh["log_z"] != first["log_z"]
    assert (edited["hits"], edited["misses"]) == (0, 1)
    assert edited["folder"] != first["folder"]
    assert not Path(first["folder"]).exists()


#: imports the kernels, then waits for a line on stdin before it runs one
WAIT = """
import sys
from crfsdca.kernels.structures import chain
print("imported", flush=True)
sys.stdin.readline()
"""
RUN_LATER = WAIT + RUN_KERNEL


def test_a_process_running_old_sources_never_serves_a_new_one(tmp_path):
    """A process that imported the kernels before an edit compiles and caches the old code
    after two processes with the edited sources, started together, cleaned its folder up
    concurrently and cached the new code: a later process still runs the new code, from its
    own folder, and removes what the old process wrote."""
    site = tmp_path / "site"
    package = _copy_package(site)
    numba_cache = tmp_path / "numba"
    old = _start(site, numba_cache, RUN_LATER)
    assert old.stdout.readline() == "imported\n"
    _edit_callee(package)
    pair = [_result(p) for p in [_start(site, numba_cache), _start(site, numba_cache)]]
    assert pair[0]["log_z"] == pair[1]["log_z"]
    old.stdin.write("go\n")
    old.stdin.flush()
    stale = _result(old)  # compiled from the sources it imported, into their folder
    assert stale["log_z"] != pair[0]["log_z"] and stale["misses"] == 1
    assert Path(stale["folder"]).is_dir() and stale["folder"] != pair[0]["folder"]
    later = _run(site, numba_cache)
    assert (later["log_z"], later["hits"], later["folder"]) == (
        pair[0]["log_z"],
        1,
        pair[0]["folder"],
    )
    assert not Path(stale["folder"]).exists()


def _package(path: Path, text: str) -> Path:
    (path / "kernels").mkdir(parents=True)
    (path / "kernels" / "k.py").write_text(text)
    return path


def test_a_folder_is_kept_while_a_package_registered_in_it_has_its_sources(tmp_path):
    """Two packages with other sources share a root without removing each other's folder; a
    package's folder of older sources goes, as does a gone package's, a folder nobody
    registered and what an interrupted removal left."""
    root = tmp_path / "root"
    one = _package(tmp_path / "one", "A = 1\n")
    two = _package(tmp_path / "two", "A = 2\n")
    old_one = root / sources_fingerprint(one)
    assert register(old_one, one) and not register(old_one, one)
    (one / "kernels" / "k.py").write_text("A = 3\n")  # edited: another digest
    folders = {p: root / sources_fingerprint(p) for p in (one, two)}
    for package, folder in folders.items():
        register(folder, package)
    shared = root / sources_fingerprint(two)  # a third package with two's sources
    register(shared, _package(tmp_path / "three", "A = 2\n"))
    (root / "unregistered").mkdir()
    (root / ".removed-interrupted" / "kernels").mkdir(parents=True)
    removed = clean_up(root, folders[one], one)
    assert sorted(removed) == sorted([old_one.name, "unregistered", ".removed-interrupted"])
    assert sorted(p.name for p in root.iterdir()) == sorted(f.name for f in folders.values())
    assert clean_up(root, folders[two], two) == []
    shutil.rmtree(two)
    assert clean_up(root, folders[one], one) == []  # three still has those sources
    shutil.rmtree(tmp_path / "three")
    assert clean_up(root, folders[one], one) == [folders[two].name]


def test_the_fingerprint_follows_kernels_and_module_moves_only(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "features").mkdir()
    (pkg / "kernels" / "chain.py").write_text("A = 1\n")
    (pkg / "features" / "layout.py").write_text("L = 1\n")
    (pkg / "cli.py").write_text("C = 1\n")
    seen = [sources_fingerprint(pkg)]
    (pkg / "cli.py").write_text("C = 2\n")  # a module no kernel depends on
    assert sources_fingerprint(pkg) == seen[-1]
    for change in (
        lambda: (pkg / "kernels" / "chain.py").write_text("A = 2\n"),  # a kernel (or its callee)
        lambda: (pkg / "features" / "layout.py").write_text("L = 2\n"),  # an argument type
        lambda: (pkg / "cli.py").rename(pkg / "features" / "cli.py"),  # a module moved
    ):
        change()
        seen.append(sources_fingerprint(pkg))
    assert len(set(seen)) == len(seen)


def test_the_fingerprint_covers_every_kernel_module(tmp_path):
    """Editing any module below crfsdca/kernels, in any of its subpackages, makes another
    digest (another cache folder)."""
    copy = _copy_package(tmp_path)
    before = sources_fingerprint(copy)
    kernel_modules = sorted((copy / "kernels").rglob("*.py"))
    subpackages = {p.parent.name for p in kernel_modules}
    assert len(kernel_modules) > 40 and {"numerics", "structures", "solvers"} <= subpackages
    for path in kernel_modules:
        text = path.read_bytes()
        path.write_bytes(text + b"\n")
        assert sources_fingerprint(copy) != before, path.relative_to(copy)
        path.write_bytes(text)
    assert sources_fingerprint(copy) == before


def test_the_root_is_next_to_a_writable_package_or_under_numba_cache_dir(tmp_path):
    assert cache_root(tmp_path / "pkg", "", {}) == tmp_path / "pkg/kernels/__pycache__/numba"
    assert cache_root(tmp_path / "pkg", str(tmp_path / "mine")) == tmp_path / "mine" / "crfsdca"


def test_the_root_moves_to_the_user_folder_when_the_package_is_read_only(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder would have to be")
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert cache_root(blocker / "pkg", "", environ) == tmp_path / "xdg" / "crfsdca" / "numba"
    assert user_cache_dir({}) == Path.home() / ".cache" / "crfsdca" / "numba"
    assert cache_root(blocker / "pkg", "", {"XDG_CACHE_HOME": str(blocker)}) is None


def test_read_only_package_caches_in_the_user_folder_in_a_fresh_process(tmp_path):
    """Importing the kernels with an unwritable package folder caches them in the user folder,
    without setting NUMBA_CACHE_DIR for numba's other users."""
    code = textwrap.dedent(
        f"""
        import os, tempfile
        real = tempfile.TemporaryFile
        def refuse(*args, dir=None, **kwargs):
            if dir is not None and str(dir).startswith({str(ROOT / "crfsdca")!r}):
                raise PermissionError(13, "read-only file system", str(dir))
            return real(*args, dir=dir, **kwargs)
        tempfile.TemporaryFile = refuse
        from crfsdca.kernels import cache
        from numba.core import config
        print(cache.current().folder.parent, os.environ.get("NUMBA_CACHE_DIR"), config.CACHE_DIR)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [str(tmp_path / "xdg" / "crfsdca" / "numba"), "None"]  # and no CACHE_DIR


def test_a_kernel_with_no_writable_folder_is_compiled_not_cached(monkeypatch):
    """No folder to cache in: numba's null cache (compiled in each process), not numba's own
    locators, which would key it on its own file only."""
    here = cache.current()
    monkeypatch.setattr(cache, "_current", CacheFolder(here.package_dir, here.digest, None))
    assert isinstance(kernel_cache(KernelCache, chain.log_forward.py_func), NullCache)
    monkeypatch.setattr(cache, "_current", here)
    located = kernel_cache(KernelCache, chain.log_forward.py_func)
    assert Path(located.cache_path) == here.folder / "kernels" / "structures"


def test_a_kernel_numba_cannot_cache_is_a_warning_naming_its_file():
    """numba declines to cache a function with dynamic globals (a ctypes pointer, say) with a
    warning at the kernel's file and line, which it reads from the locator: the digest
    locator has them (an AttributeError from inside numba's cache before)."""
    located = kernel_cache(KernelCache, chain.log_forward.py_func)
    uncachable = SimpleNamespace(
        lifted=(), library=SimpleNamespace(has_dynamic_globals=True),
        fndesc=SimpleNamespace(qualname="chain.log_forward"),
    )  # fmt: skip
    with pytest.warns(NumbaWarning, match="Cannot cache compiled function") as caught:
        assert located._impl.check_cachable(uncachable) is False
    assert Path(caught[0].filename) == Path(chain.__file__)
    assert caught[0].lineno == chain.log_forward.py_func.__code__.co_firstlineno


def test_the_compile_ahead_process_of_other_sources_ends_without_its_ready_line():
    """The second process of a first fit (crfsdca.estimators.compile_worker) whose kernel
    sources differ from the fit's (edited in between) compiles nothing: exit 1, no ready."""
    from crfsdca.estimators.compile_ahead import DIGEST_ENV

    env = dict(os.environ, **{DIGEST_ENV: "0" * 16})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "crfsdca.estimators.compile_worker", "float64"],
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert (done.returncode, done.stdout) == (1, b"")
