"""Recovery after an interrupted run (kill -9, a lost node): what `make run` and `make quick` do
first.

A killed Snakemake leaves its lock directory (`.snakemake/locks`), so the next invocation refuses to
start, and a killed write leaves its hidden temporary file (relmas.io.TEMP_NAME, with relmas's own
prefix `.relmas-tmp.`). Both are removed only when no other Snakemake or relmas process works in
the same directory: Snakemake's lock files record no process, so this module looks for such
processes itself (Linux /proc: a process whose working directory is inside the project and whose
command line runs snakemake or relmas, other than this process and its ancestors). A results
directory may lie outside the checkout and be shared with another checkout's study, whose
processes that search cannot see: a temporary file is therefore also removed only when no live
process holds it (every writer holds an exclusive flock on its temporary file until its write
ends, relmas.io.atomic_path; the kernel releases it when the writer dies). Temporary files are
swept only under the study's results directory, where the pipeline writes: a file elsewhere that
merely looks like one is a user's. Incomplete outputs are left to Snakemake's
`--rerun-incomplete`, and runs left RUNNING in MLflow to relmas.tracking, which closes them when the
next stage starts.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from relmas.command import load_configs
from relmas.errors import InputError
from relmas.io import TEMP_NAME, remove_if_unheld
from relmas.paths import REPLAY_FILE, ResultPaths

LOCKS = Path(".snakemake") / "locks"
DEFAULT_CONFIG = Path("config") / "config.yaml"  # the Snakefile's when no --configfile is given


@dataclass
class Recovery:
    busy: list[int] = field(default_factory=list)  # pids of other instances (then nothing done)
    unlocked: bool = False  # lock files were removed
    swept: list[Path] = field(default_factory=list)
    on_disk: int = 0  # bytes of the files under the results directories, once swept
    # the replay buffers among them: each belongs to a training that has not ended (a finished
    # training deletes its own), by far the largest files of a study
    replay_buffers: list[Path] = field(default_factory=list)


def recover(root: str | Path, results: Iterable[str | Path]) -> Recovery:
    """Unlock the workflow in the project directory `root` and sweep the stale temporary files of
    relmas's writer under the results directories `results` (relative to `root`: Snakemake's
    working directory), unless another instance runs."""
    root = Path(root).resolve()
    busy = other_instances(root)
    if busy:
        return Recovery(busy=busy)
    locks = root / LOCKS
    # a finished run leaves the directory empty: only lock files in it are a lock
    unlocked = locks.is_dir() and any(locks.iterdir())
    if unlocked:
        shutil.rmtree(locks)  # what `snakemake --unlock` does
    directories = [root / d for d in results]
    swept = sweep_temp_files(directories)
    on_disk, replay_buffers = disk_use(directories)
    return Recovery(unlocked=unlocked, swept=swept, on_disk=on_disk, replay_buffers=replay_buffers)


def disk_use(directories: Iterable[Path]) -> tuple[int, list[Path]]:
    """(bytes of the files under `directories`, the replay buffers among them): what a study
    leaves on disk, said after every recovery so that a user sees it before a run adds to it."""
    total, replay_buffers = 0, []
    for top in directories:
        for directory, _, files in os.walk(top):
            for name in files:
                path = Path(directory) / name
                total += path.lstat().st_size
                if REPLAY_FILE.match(name):
                    replay_buffers.append(path)
    return total, sorted(replay_buffers)


def sweep_temp_files(directories: Iterable[Path]) -> list[Path]:
    """Remove the temporary files of relmas's atomic writes under `directories` that no live
    writer holds (symbolic links and dot directories not followed: the pipeline writes into
    neither)."""
    swept = []
    for top in directories:
        for directory, subdirs, files in os.walk(top):
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
            for name in files:
                path = Path(directory) / name
                if TEMP_NAME.match(name) and remove_if_unheld(path):
                    swept.append(path)
    return swept


def other_instances(root: Path) -> list[int]:
    """Pids of the snakemake and relmas processes working inside `root`, bar this one's lineage."""
    proc = Path("/proc")
    if not proc.is_dir():
        raise OSError(f"{proc} is needed to tell whether another instance runs")
    mine = _lineage(os.getpid())
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or another user's
        if (cwd == root or root in cwd.parents) and _runs_pipeline(argv):
            found.append(int(entry.name))
    return sorted(found)


def _runs_pipeline(argv: list[bytes]) -> bool:
    """Whether a command line is snakemake's or this package's (`python -m relmas`, ...)."""
    words = [Path(a.decode(errors="replace")).name for a in argv[:3]]
    return "snakemake" in words or __package__ in words


def _lineage(pid: int) -> set[int]:
    """`pid` and its ancestors (make, the shell of a recipe) — they run *this* recovery."""
    lineage = set()
    while pid > 1 and pid not in lineage:
        lineage.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return lineage


def recover_command(args: argparse.Namespace) -> None:
    """Unlock the workflow and sweep the stale temporary files of the study's results after a
    kill, unless another instance runs. Loading the config first also checks it in one line before
    Snakemake reads it (`make run` and `make quick` call this first)."""
    if not args.dir.is_dir():
        raise InputError(args.dir, "--dir", "an existing project directory")
    results = ResultPaths.of(load_configs(args.config or [str(args.dir / DEFAULT_CONFIG)])).root
    done = recover(args.dir, [results])
    if done.busy:
        pids = ", ".join(map(str, done.busy))
        print(f"recover: another instance works in {args.dir} (pid {pids}): nothing touched")
        return
    lock_note = "removed the stale Snakemake lock" if done.unlocked else "no Snakemake lock"
    print(f"recover: {lock_note}, swept {len(done.swept)} stale temporary file(s) in {results}")
    replay_bytes = sum(path.stat().st_size for path in done.replay_buffers)
    print(
        f"recover: {results} holds {done.on_disk / 1e6:.1f} MB, of which "
        f"{len(done.replay_buffers)} replay buffer(s) of unfinished trainings "
        f"{replay_bytes / 1e6:.1f} MB (a training deletes its own once it has ended)"
    )
