"""The output folder of a run: the one configuration it holds, and what a refused run leaves.

* ``OUT/config.json``: the command, its ``run_id``, its configuration and the content keys of
  the datasets it read (:func:`read_config`). A folder holds one configuration: another one is
  refused, naming the differences (:func:`check_folder`), unless ``new_grid``, which keeps the
  previous ``config.json`` and ``results.parquet`` beside as ``config.<run_id>.json`` and
  ``results.<run_id>.parquet`` (:func:`keep_previous`).
* A dataset whose content changed since the last run is named (:func:`data_changes`): a run
  notes it (its tasks have new keys and run again); consolidating without running refuses
  (:func:`divopt_rag.experiments.engine.consolidate.refuse_changed_data`).
* :class:`Footprint`: what the folder held when its lock was taken, so that a run refused while
  it is prepared removes exactly what it created.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from divopt_rag.data.files import read_regular
from divopt_rag.data.names import UnsafeName, checked_name
from divopt_rag.experiments.engine import store
from divopt_rag.experiments.engine.plan import RunSpec, Task

__all__ = ["read_config", "check_folder", "keep_previous", "data_changes", "changed_data", "Footprint"]


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): d}


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], limit: int = 4) -> str:
    a, b = _flat(json.loads(json.dumps(old, default=str))), _flat(json.loads(json.dumps(new, default=str)))
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k, "<absent>") != b.get(k, "<absent>")]
    text = "; ".join(f"{k}: {a.get(k, '<absent>')!r} -> {b.get(k, '<absent>')!r}" for k in keys[:limit])
    return text + (f"; and {len(keys) - limit} more" if len(keys) > limit else "")


def read_config(out: Path) -> dict[str, Any] | None:
    """The folder's ``config.json`` (None when there is none); ValueError naming it when it is
    not a divopt-rag run config."""
    path = out / "config.json"
    if not path.exists():
        return None
    try:
        old = json.loads(read_regular(path))
        # the run id names the files kept beside (config.<run_id>.json): a hash, never a path
        checked_name(old["run_id"], "run_id", path, hexadecimal=True, length=store.RUN_ID_LENGTH)
        return old
    except UnsafeName as exc:
        raise ValueError(f"not a divopt-rag run config: {exc}; use another output folder") from None
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise ValueError(f"{path}: not a divopt-rag run config ({exc}); use another output folder") from None


def check_folder(out: str | os.PathLike, spec: RunSpec, new_grid: bool = False) -> str | None:
    """Refuse to run ``spec`` in a folder that holds another configuration (its ``config.json``
    has another run id), naming the differences; with ``new_grid`` that is allowed and the
    previous run id is returned (the caller keeps its files beside). A folder of another command
    is always refused. None when the folder is new or holds this very configuration."""
    out = Path(out)
    table = out / "results.parquet"  # written after every run: a folder there is found now, not then
    if (table.exists() or table.is_symlink()) and not table.is_file():
        raise ValueError(f"{table}: is not a file (a folder, a FIFO or a broken link) where the run writes its table; "
                         f"remove it or use another output folder")
    old = read_config(out)
    if old is None:
        return None
    old_id, old_command = str(old["run_id"]), old.get("command", "")
    if old_command != spec.command:
        raise ValueError(f"{out} holds a {old_command or 'divopt-rag'} run ({old_id}), not a {spec.command} run: "
                         f"use another output folder")
    if old_id == spec.run_id:
        return None
    diff = _differences(old.get("config", {}), spec.config())
    if not new_grid:
        raise ValueError(f"{out} holds {spec.command} {old_id} (config.json) with another configuration ({diff}); "
                         f"its results.parquet would be replaced: use another output folder, or --new-grid "
                         f"(new_grid=True) to run this grid here and keep the previous files as "
                         f"config.{old_id}.json and results.{old_id}.parquet")
    return old_id


def keep_previous(out: Path, old_id: str) -> None:
    """Keep the previous configuration's files beside, as ``config.<old_id>.json`` and
    ``results.<old_id>.parquet`` (``old_id`` is checked again: it names files in ``out``)."""
    checked_name(old_id, "run_id", out / "config.json", hexadecimal=True, length=store.RUN_ID_LENGTH)
    for name, kept in (("config.json", f"config.{old_id}.json"), ("results.parquet", f"results.{old_id}.parquet")):
        if (out / name).exists():
            os.replace(out / name, out / kept)


def changed_data(old: Mapping[str, Any] | None, keys: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """label -> (content key recorded in ``old``, content key now), for every dataset whose
    content changed since the folder's last run."""
    before = (old or {}).get("data", {}) or {}
    return {label: (str(before[label]), str(key)) for label, key in keys.items()
            if label in before and before[label] != key}


def data_changes(old: Mapping[str, Any] | None, keys: Mapping[str, str], out: Path,
                 tasks: Sequence[Task] = (), done: Collection[str] = ()) -> list[str]:
    """Notes naming every dataset whose content key changed since the folder's last run, and how
    many of its runs keep their rows: a run's key hashes the content it reads, so a run whose own
    content did not change (another query changed, or an earlier ``--limit`` ran fewer queries) is
    reused, and only the others run again."""
    notes = []
    for label, (was, now) in changed_data(old, keys).items():
        mine = [t for t in tasks if label == t.dataset or label.startswith(f"{t.dataset} [")] or list(tasks)
        reused = sum(t.key in done for t in mine)
        notes.append(f"dataset {label!r}: its content differs from the last run in {out}, or other queries of "
                     f"it run (content key {was} -> {now}); {reused} of its {len(mine)} runs read content this "
                     f"folder already holds and keep their rows, the others run")
    return notes


class Footprint:
    """What an output folder held when its lock was taken, so that a run refused while it is
    being prepared (another configuration in the folder, a dataset that cannot be loaded, an
    empty grid) removes exactly what it created (the folders and the lock file the lock made,
    ``parts/`` and ``data/`` entries) and leaves the user's files as they were. Taken under the
    lock: nothing another run wrote is ever removed."""

    _SUBFOLDERS = ("", "parts", "data")

    def __init__(self, out: Path, holder: Mapping[str, Any]) -> None:
        self.out = out
        self.created = list(holder.get("created", ()))
        self.lock_file = out / store.LOCK_NAME if holder.get("created_lock_file") else None
        self.entries = {sub: set(os.listdir(out / sub)) if (out / sub).is_dir() else None for sub in self._SUBFOLDERS}

    def undo(self) -> None:
        """Remove what was created since (call it while holding the folder's lock)."""
        if self.created:
            shutil.rmtree(self.created[0], ignore_errors=True)
            return
        if self.lock_file is not None:
            self.lock_file.unlink(missing_ok=True)
        for sub in self._SUBFOLDERS:
            before, folder = self.entries.get(sub), self.out / sub
            if before is None or not folder.is_dir():
                continue  # a new subfolder is an entry of its parent
            for name in set(os.listdir(folder)) - before:
                path = folder / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
