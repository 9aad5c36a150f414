"""Snapshot and restore into shared-filesystem repositories (`type: fs`) under `path.repo`.

A repository folder holds:

- `blobs/<sha256>`: file contents, content-addressed. Segments are immutable, so a file a
  previous snapshot copied is never copied again (incremental), and one blob serves every
  snapshot that has it.
- `snapshots/<uuid>.json`: one manifest per *finished* snapshot, written last (temporary file,
  fsync, rename, folder fsync). A snapshot cut short (a crash, `kill -9`) has no manifest, so it
  is never listed; the blobs it wrote are garbage the next delete collects.

**What a snapshot holds** (the point in time): each shard's published Searcher, acquired once
(`Shard.acquire_searcher`) after a refresh, so the shard's every write acknowledged before the
snapshot started is in it; it pins the segment folders until they are copied, so neither a
merge nor a refresh can delete a file the snapshot still reads. Per segment: its files (the
derived caches excepted: they are rebuilt on read) and the live-docs array of that Searcher.
Writes going on meanwhile go into later segments and are not in the snapshot.

**Restore** creates each index (empty, its settings and mappings from the manifest), closes
it, writes each shard's folder (segment files, live docs, a `commit.json` naming them) and
opens it: recovery reads the commit as at start-up.

The repository location must be inside a `path.repo` folder (the `--path-repo` flag), so no
request names an arbitrary folder; snapshot names and index names never become file names
(manifests are named by uuid, blobs by digest).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import threading
import time
import uuid as uuidlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import re2

from leafsearch.common.durable import FOLDER_MODE, fsync_dir, private
from leafsearch.common.settings import parse_index_settings
from leafsearch.errors import ActionRequestValidation, ElasticError, IllegalArgument
from leafsearch.index.derived_files import is_derived
from leafsearch.index.mapping import Mapping as IndexMapping
from leafsearch.index.mapping import _wildcard as simple_match
from leafsearch.indices import data_streams
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.unsupported import NotSupported
from leafsearch.version import VERSION

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.index.searcher import Searcher
    from leafsearch.indices.owner import IndicesOwner

_log = logging.getLogger("leafsearch")
#: `version_id` of a snapshot taken by Elasticsearch 8.17.0.
VERSION_ID = 8170099
_CHUNK = 1 << 20
_NAME_INVALID = frozenset('\\/*?"<>| ,#')


class RepositoryMissing(ElasticError):
    error_type = "repository_missing_exception"
    status = 404

    def __init__(self, name: str) -> None:
        super().__init__(f"[{name}] missing")


class RepositoryError(ElasticError):
    """Elasticsearch's `repository_exception` (it answers 500; a bad location is the request's
    fault, so leafsearch answers 400)."""

    error_type = "repository_exception"
    status = 400

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"[{name}] {why}")


class SnapshotMissing(ElasticError):
    error_type = "snapshot_missing_exception"
    status = 404

    def __init__(self, repo: str, snapshot: str) -> None:
        super().__init__(f"[{repo}:{snapshot}] is missing")


class InvalidSnapshotName(ElasticError):
    error_type = "invalid_snapshot_name_exception"
    status = 400

    def __init__(self, repo: str, snapshot: str, why: str) -> None:
        super().__init__(f"[{repo}:{snapshot}] Invalid snapshot name [{snapshot}], {why}")


class ConcurrentSnapshot(ElasticError):
    error_type = "concurrent_snapshot_execution_exception"
    status = 503


class SnapshotRestoreError(ElasticError):
    """Elasticsearch's `snapshot_restore_exception` (500 there; a name clash is the request's
    fault, 400 here)."""

    error_type = "snapshot_restore_exception"
    status = 400


# ---------------------------------------------------------------------------------------------
# repositories


@dataclass
class Repository:
    name: str
    location: Path
    settings: dict[str, Any]
    #: Held while a snapshot is written or deleted: a delete's garbage collection never takes a
    #: blob a snapshot being written has just stored.
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The snapshots being taken (their status bodies), by name.
    running: dict[str, dict[str, Any]] = field(default_factory=dict)

    def blob(self, digest: str) -> Path:
        return self.location / "blobs" / digest

    def manifests(self) -> list[dict[str, Any]]:
        """Every finished snapshot, oldest first. A manifest that does not parse (a disk that
        lost it) is skipped, never a reason to refuse the whole listing."""
        folder = self.location / "snapshots"
        out = []
        if folder.is_dir():
            for path in folder.glob("*.json"):
                try:
                    out.append(orjson.loads(path.read_bytes()))
                except (OSError, orjson.JSONDecodeError):
                    continue
        out.sort(key=lambda m: (m["start_time_in_millis"], m["snapshot"]))
        return out

    def find(self, snapshot: str) -> dict[str, Any]:
        for manifest in self.manifests():
            if manifest["snapshot"] == snapshot:
                return manifest
        raise SnapshotMissing(self.name, snapshot)

    def to_body(self) -> dict[str, Any]:
        return {
            "type": "fs",
            "uuid": self.settings.get("uuid", "_na_"),
            "settings": {k: v for k, v in self.settings.items() if k != "uuid"},
        }


class Repositories:
    """The node's registered repositories (`<data>/repositories.json`), and `path.repo`."""

    def __init__(self, path: Path, path_repo: list[Path]) -> None:
        self.path = path
        self.path_repo = [p.absolute() for p in path_repo]
        self.current: dict[str, Repository] = {}
        self.version = 0
        #: Snapshots running in the background (`wait_for_completion=false`), joined on close.
        self.threads: list[threading.Thread] = []
        if path.exists():
            for name, settings in orjson.loads(path.read_bytes()).items():
                self.current[name] = Repository(name, Path(settings["location_path"]), settings["settings"])

    def publish(self, repos: dict[str, Repository]) -> None:
        tmp = self.path.with_suffix(".tmp")
        body = {n: {"location_path": str(r.location), "settings": r.settings} for n, r in repos.items()}
        with open(tmp, "wb", opener=private) as fh:
            fh.write(orjson.dumps(body))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        self.current = repos
        self.version += 1

    def get(self, name: str) -> Repository:
        """A registered repository, its location still inside `path.repo` (which a restart with
        other `--path-repo` folders may have changed)."""
        repo = self.current.get(name)
        if repo is None:
            raise RepositoryMissing(name)
        if self.resolve_location(name, repo.settings["location"]) != repo.location:
            raise RepositoryError(
                name, f"location [{repo.settings['location']}] moved: register the repository again"
            )
        return repo

    def resolve_location(self, name: str, location: str) -> Path:
        """A `location` inside one of the `path.repo` folders: a relative one under the first."""
        if not self.path_repo:
            raise RepositoryError(
                name,
                f"location [{location}] doesn't match any of the locations specified by path.repo because "
                "this setting is empty",
            )
        if "\x00" in location:
            raise RepositoryError(name, f"location [{location!r}] is not a valid path")
        candidate = Path(location)
        if not candidate.is_absolute():
            candidate = self.path_repo[0] / candidate
        resolved = Path(os.path.realpath(candidate))
        for root in self.path_repo:
            real_root = Path(os.path.realpath(root))
            if resolved == real_root or real_root in resolved.parents:
                return resolved
        raise RepositoryError(
            name,
            f"location [{location}] doesn't match any of the locations specified by path.repo "
            f"[{', '.join(str(p) for p in self.path_repo)}]",
        )

    def close(self) -> None:
        for thread in self.threads:
            thread.join()

    def state_section(self) -> dict[str, Any]:
        return {name: repo.to_body() for name, repo in sorted(self.current.items())}


def put_repository(node: IndicesOwner, name: str, body: Any, *, verify: bool = True) -> dict[str, Any]:
    _check_name(name, "repository")
    if not isinstance(body, Mapping):
        raise IllegalArgument("request body is required")
    for key in body:
        if key not in ("type", "settings"):
            raise IllegalArgument(f"unknown field [{key}] in repository [{name}]")
    kind = body.get("type")
    if kind is None:
        raise ActionRequestValidation("type is missing")
    if kind != "fs":
        raise RepositoryError(name, f"repository type [{kind}] does not exist")
    settings = body.get("settings") or {}
    if not isinstance(settings, Mapping):
        raise IllegalArgument("[settings] must be an object")
    settings = {k: v for k, v in _flat(settings).items()}
    location = settings.get("location")
    if not isinstance(location, str) or not location:
        raise RepositoryError(name, "missing location")
    repos = node.repositories
    path = repos.resolve_location(name, location)
    try:
        (path / "blobs").mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        (path / "snapshots").mkdir(mode=FOLDER_MODE, exist_ok=True)
        fsync_dir(path)
    except OSError as exc:
        raise RepositoryError(name, f"cannot create blob store at [{location}]: {exc.strerror}") from None
    with node.lock:
        for other, repo in repos.current.items():
            if other != name and repo.location == path:
                raise RepositoryError(
                    name, f"location [{location}] is already the location of repository [{other}]"
                )
        previous = repos.current.get(name)
        settings["uuid"] = previous.settings.get("uuid") if previous else uuidlib.uuid4().hex[:22]
        repo = Repository(name, path, settings)
        if previous is not None:
            repo.lock, repo.running = previous.lock, previous.running
        repos.publish({**repos.current, name: repo})
    return {"acknowledged": True}


def _flat(body: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in body.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value if isinstance(value, str) else orjson.dumps(value).decode()
    return out


def _check_name(name: str, what: str) -> None:
    if not name or any(c in _NAME_INVALID for c in name) or name.startswith("_"):
        raise IllegalArgument(
            f"Invalid {what} name [{name}], must not contain '#', '\\', '/', '*', '?', '\"', '<', '>', '|', "
            "' ', ',' and must not start with '_'"
        )


def get_repositories(node: IndicesOwner, expr: str | None) -> dict[str, Any]:
    repos = node.repositories.current
    if not expr or expr in ("_all", "*"):
        return {n: r.to_body() for n, r in sorted(repos.items())}
    out = {}
    for term in expr.split(","):
        if "*" in term:
            out.update({n: r.to_body() for n, r in repos.items() if simple_match(term).fullmatch(n)})
        elif term in repos:
            out[term] = repos[term].to_body()
        else:
            raise RepositoryMissing(term)
    return dict(sorted(out.items()))


def delete_repository(node: IndicesOwner, expr: str) -> dict[str, Any]:
    """Unregister repositories; their files stay, as in Elasticsearch."""
    with node.lock:
        repos = dict(node.repositories.current)
        names = []
        for term in expr.split(","):
            if "*" in term or term == "_all":
                names += [n for n in repos if term == "_all" or simple_match(term).fullmatch(n)]
            elif term in repos:
                names.append(term)
            else:
                raise RepositoryMissing(term)
        for name in names:
            if repos[name].running:
                raise ConcurrentSnapshot(
                    f"trying to modify or unregister repository [{name}] that is currently used"
                )
            repos.pop(name, None)
        node.repositories.publish(repos)
    return {"acknowledged": True}


# ---------------------------------------------------------------------------------------------
# create


def _digest_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _store_file(repo: Repository, path: Path, digest: str) -> bool:
    """Copy `path` into the blob `digest` unless it is there; whether it was copied."""
    target = repo.blob(digest)
    if target.exists():
        return False
    tmp = target.with_name(f"{digest}.tmp-{uuidlib.uuid4().hex}")
    try:
        with open(path, "rb") as src, open(tmp, "wb", opener=private) as dst:
            shutil.copyfileobj(src, dst, _CHUNK)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _store_bytes(repo: Repository, data: bytes) -> tuple[str, bool]:
    digest = hashlib.sha256(data).hexdigest()
    target = repo.blob(digest)
    if target.exists():
        return digest, False
    tmp = target.with_name(f"{digest}.tmp-{uuidlib.uuid4().hex}")
    try:
        with open(tmp, "wb", opener=private) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return digest, True


@dataclass
class _Counts:
    files: int = 0
    bytes: int = 0
    new_files: int = 0
    new_bytes: int = 0

    def add(self, size: int, copied: bool) -> None:
        self.files += 1
        self.bytes += size
        if copied:
            self.new_files += 1
            self.new_bytes += size


def _known_segments(repo: Repository) -> dict[str, dict[str, Any]]:
    """Segment files earlier snapshots stored, by `<index uuid>/<shard>/<segment>`: a segment is
    immutable, so its files need not even be read again."""
    known: dict[str, dict[str, Any]] = {}
    for manifest in repo.manifests():
        for index in manifest["indices"].values():
            for shard_no, shard in index["shards"].items():
                for seg in shard["segments"]:
                    key = f"{index['uuid']}/{shard_no}/{seg['name']}"
                    if all(repo.blob(f["blob"]).exists() for f in seg["files"].values()):
                        known[key] = seg["files"]
    return known


def _snapshot_shard(
    repo: Repository,
    index: Index,
    shard_no: int,
    searcher: Searcher,
    known: dict[str, dict[str, Any]],
    counts: _Counts,
) -> dict[str, Any]:
    """Copy what one shard's Searcher holds (released at the end)."""
    try:
        segments = []
        max_seq_no = -1
        for view in searcher.views:
            seg = view.segment
            key = f"{index.uuid}/{shard_no}/{seg.name}"
            files = known.get(key)
            if files is not None:
                for f in files.values():
                    counts.add(f["size"], False)
            else:
                files = {}
                for name, path in _segment_files(seg.folder, f"[{index.name}][{shard_no}]"):
                    digest, size = _digest_file(path)
                    counts.add(size, _store_file(repo, path, digest))
                    files[name] = {"blob": digest, "size": size}
            entry: dict[str, Any] = {"name": seg.name, "files": files, "max_doc": seg.max_doc}
            if view.live is not None:
                buf = io.BytesIO()
                np.save(buf, view.live)
                data = buf.getvalue()
                digest, copied = _store_bytes(repo, data)
                counts.add(len(data), copied)
                entry["live"] = {"blob": digest, "size": len(data)}
            if seg.max_doc:
                max_seq_no = max(max_seq_no, int(seg.seq_nos.max()))
            segments.append(entry)
        return {"segments": segments, "max_seq_no": max_seq_no, "docs": searcher.live_count}
    finally:
        searcher.release()


#: A folder inside a segment's: the segment of a nested path's child documents (`Segment.nested`).
_NESTED_FOLDER = re2.compile(r"n[0-9]+")


def _segment_files(folder: Path, shard: str, prefix: str = "") -> Iterator[tuple[str, Path]]:
    """(name, path) of a segment's files but its derived ones; the files of its nested child
    segments named by their folders (`n0/meta.json`). Anything else is refused: never skip data."""
    for path in sorted(folder.iterdir()):
        if is_derived(path.name):
            continue
        if path.is_dir() and _NESTED_FOLDER.fullmatch(path.name):
            yield from _segment_files(path, shard, f"{prefix}{path.name}/")
        elif path.is_file():
            yield prefix + path.name, path
        else:
            raise ElasticError(
                f"segment [{folder.name}] of {shard} holds [{path.name}], which is not a file",
                error_type="snapshot_exception",
            )


def _millis_text(millis: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis / 1000)) + f".{millis % 1000:03d}Z"


def snapshot_info(manifest: Mapping[str, Any], repo: str | None = None) -> dict[str, Any]:
    """A snapshot as `GET /_snapshot/<repo>/<snapshot>` shows it."""
    shards = sum(len(i["shards"]) for i in manifest["indices"].values())
    body: dict[str, Any] = {
        "snapshot": manifest["snapshot"],
        "uuid": manifest["uuid"],
    }
    if repo is not None:
        body["repository"] = repo
    body.update(
        {
            "version_id": VERSION_ID,
            "version": VERSION,
            "indices": sorted(manifest["indices"]),
            "data_streams": manifest.get("data_streams", []),
            "include_global_state": manifest.get("include_global_state", True),
        }
    )
    if manifest.get("metadata") is not None:
        body["metadata"] = manifest["metadata"]
    body.update(
        {
            "state": manifest["state"],
            "start_time": _millis_text(manifest["start_time_in_millis"]),
            "start_time_in_millis": manifest["start_time_in_millis"],
            "end_time": _millis_text(manifest["end_time_in_millis"]),
            "end_time_in_millis": manifest["end_time_in_millis"],
            "duration_in_millis": manifest["end_time_in_millis"] - manifest["start_time_in_millis"],
            "failures": [],
            "shards": {"total": shards, "failed": 0, "successful": shards},
            "feature_states": [],
        }
    )
    return body


def _parse_create(body: Any) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, Mapping):
        raise IllegalArgument("request body must be an object")
    allowed = {
        "indices",
        "ignore_unavailable",
        "include_global_state",
        "metadata",
        "partial",
        "expand_wildcards",
        "feature_states",
        "allow_no_indices",
    }
    for key in body:
        if key not in allowed:
            raise IllegalArgument(f"Unknown key for a VALUE_STRING in [{key}].")
    indices = body.get("indices")
    if isinstance(indices, list):
        if not all(isinstance(i, str) for i in indices):
            raise IllegalArgument("[indices] must be a string or an array of strings")
        indices = ",".join(indices)
    elif indices is not None and not isinstance(indices, str):
        raise IllegalArgument("[indices] must be a string or an array of strings")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise IllegalArgument("[metadata] must be an object")
    return {**body, "indices": indices}


def create_snapshot(
    node: IndicesOwner, repo_name: str, snapshot: str, body: Any, *, wait_for_completion: bool
) -> dict[str, Any]:
    repo = node.repositories.get(repo_name)
    _check_snapshot_name(repo_name, snapshot)
    request = _parse_create(body)
    options = IndicesOptions(
        ignore_unavailable=bool(request.get("ignore_unavailable", False)),
        # closed indices are left out of wildcards (their shards hold no Searcher); named, refused
        expand_wildcards=str(request.get("expand_wildcards", "open,hidden")),
    )
    expr = request.get("indices") or "*"
    with node.lock:
        names = node.resolve_indices(
            expr,
            ignore_unavailable=options.ignore_unavailable,
            allow_no_indices=True,
            expand_wildcards=options.expand_wildcards,
            forbid_closed=False,
        )
        indices = [node.indices[n] for n in sorted(names)]
    closed = [index.name for index in indices if index.closed]
    if closed:
        raise ElasticError(
            f"[{repo_name}:{snapshot}] Indices {_names_list(closed)} are closed: leafsearch snapshots "
            "open indices",
            error_type="snapshot_exception",
            status=400,
        )
    for index in indices:
        if index.remote is not None:
            raise NotSupported(f"a snapshot of [{index.name}], whose shards are Ray actors")
    if not repo.lock.acquire(blocking=False):
        raise ConcurrentSnapshot(
            f"[{repo_name}:{snapshot}] a snapshot or a deletion is already running in this repository"
        )
    try:
        if any(m["snapshot"] == snapshot for m in repo.manifests()) or snapshot in repo.running:
            raise InvalidSnapshotName(repo_name, snapshot, "snapshot with the same name already exists")
        streams = {
            s.name: s.to_json()
            for s in node.data_streams.current.values()
            if any(i.name in s.indices for i in indices)
        }
        manifest: dict[str, Any] = {
            "snapshot": snapshot,
            "uuid": uuidlib.uuid4().hex[:22],
            "state": "IN_PROGRESS",
            "start_time_in_millis": int(time.time() * 1000),
            "include_global_state": bool(request.get("include_global_state", True)),
            "metadata": request.get("metadata"),
            "data_streams": sorted(streams),
            "streams": streams,
            "indices": {},
        }
        repo.running[snapshot] = manifest
    except BaseException:
        repo.lock.release()
        raise
    if wait_for_completion:
        _run_snapshot(node, repo, manifest, indices)
        return {"snapshot": snapshot_info(manifest, repo_name)}
    thread = threading.Thread(
        target=_run_logged, args=(node, repo, manifest, indices), name="leafsearch-snapshot", daemon=True
    )
    node.repositories.threads = [t for t in node.repositories.threads if t.is_alive()] + [thread]
    thread.start()
    return {"accepted": True}


def _run_logged(node: IndicesOwner, repo: Repository, manifest: dict[str, Any], indices: list[Index]) -> None:
    """A snapshot in the background (`wait_for_completion=false`): a failure goes to the log;
    the snapshot is not listed (it has no manifest)."""
    try:
        _run_snapshot(node, repo, manifest, indices)
    except Exception:
        _log.exception("snapshot [%s:%s] failed", repo.name, manifest["snapshot"])


def _run_snapshot(
    node: IndicesOwner, repo: Repository, manifest: dict[str, Any], indices: list[Index]
) -> None:
    """Copy each shard's snapshot, then write the manifest (the repository lock is held)."""
    pinned: list[Searcher] = []  # taken and not yet handed to `_snapshot_shard`
    try:
        counts = _Counts()
        manifest["counts"] = counts
        known = _known_segments(repo)
        # The point in time: every index refreshed, then every shard's Searcher taken at once,
        # before any file is copied (each shard's own point, as in Elasticsearch).
        for index in indices:
            index.refresh()
        for index in indices:
            pinned += [shard.acquire_searcher() for shard in index.shards]
        for index in indices:
            entry = {
                "uuid": index.uuid,
                "settings": dict(index.settings),
                "mappings": index.mapping.to_body(),
                "aliases": {a: m.to_body() for a, m in node.aliases.of_index(index.name).items()},
                "data_stream": index.data_stream,
                "shards": {},
            }
            for n in range(index.num_shards):
                searcher = pinned.pop(0)
                entry["shards"][str(n)] = _snapshot_shard(repo, index, n, searcher, known, counts)
            manifest["indices"][index.name] = entry
        fsync_dir(repo.location / "blobs")
        manifest.pop("counts")
        manifest["stats"] = {
            "file_count": counts.files,
            "size_in_bytes": counts.bytes,
            "incremental_file_count": counts.new_files,
            "incremental_size_in_bytes": counts.new_bytes,
        }
        manifest["state"] = "SUCCESS"
        manifest["end_time_in_millis"] = int(time.time() * 1000)
        folder = repo.location / "snapshots"
        tmp = folder / f"{manifest['uuid']}.tmp"
        with open(tmp, "wb", opener=private) as fh:
            fh.write(orjson.dumps(manifest))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / f"{manifest['uuid']}.json")
        fsync_dir(folder)
    except BaseException:
        for searcher in pinned:
            searcher.release()
        manifest["state"] = "FAILED"
        manifest.pop("counts", None)
        manifest.setdefault("end_time_in_millis", int(time.time() * 1000))
        raise
    finally:
        repo.running.pop(manifest["snapshot"], None)
        repo.lock.release()


def _names_list(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _check_snapshot_name(repo: str, name: str) -> None:
    if not name:
        raise InvalidSnapshotName(repo, name, "cannot be empty")
    if any(c in _NAME_INVALID for c in name):
        raise InvalidSnapshotName(
            repo, name, 'must not contain the following characters [\\, /, *, ?, ", <, >, |,  , ,, #]'
        )
    if name.startswith("_"):
        raise InvalidSnapshotName(repo, name, "must not start with '_'")
    if name != name.lower():
        raise InvalidSnapshotName(repo, name, "must be lowercase")


# ---------------------------------------------------------------------------------------------
# list, status, delete


def _selected(repo: Repository, expr: str, *, ignore_unavailable: bool = False) -> list[dict[str, Any]]:
    """The finished snapshots `expr` names (`_current`: the running ones, which have none)."""
    if expr == "_current":
        return []
    manifests = repo.manifests()
    if expr in ("_all", "*"):
        return manifests
    out: list[dict[str, Any]] = []
    for term in expr.split(","):
        if term in ("_all", "*"):
            return manifests
        if "*" in term:
            out += [m for m in manifests if simple_match(term).fullmatch(m["snapshot"]) and m not in out]
        else:
            found = [m for m in manifests if m["snapshot"] == term]
            if not found and not ignore_unavailable and term not in repo.running:
                raise SnapshotMissing(repo.name, term)
            out += [m for m in found if m not in out]
    return out


def get_snapshots(
    node: IndicesOwner, repo_expr: str, expr: str, *, ignore_unavailable: bool
) -> dict[str, Any]:
    repos = node.repositories
    if repo_expr in ("_all", "*"):
        selected_repos = sorted(repos.current)
    else:
        selected_repos = []
        for term in repo_expr.split(","):
            if "*" in term:
                selected_repos += sorted(n for n in repos.current if simple_match(term).fullmatch(n))
            else:
                repos.get(term)
                selected_repos.append(term)
    snapshots = []
    for name in selected_repos:
        repo = repos.current[name]
        snapshots += [
            snapshot_info(m, name) for m in _selected(repo, expr, ignore_unavailable=ignore_unavailable)
        ]
        for running in list(repo.running.values()):
            if expr in ("_all", "*", "_current") or running["snapshot"] in expr.split(","):
                snapshots.append(_running_info(running, name))
    return {"snapshots": snapshots, "total": len(snapshots), "remaining": 0}


def cat_rows(node: IndicesOwner, repo_name: str) -> list[dict[str, Any]]:
    """`_cat/snapshots/<repository>`: one row per finished snapshot."""
    repo = node.repositories.get(repo_name)
    rows = []
    for manifest in repo.manifests():
        start, end = manifest["start_time_in_millis"], manifest["end_time_in_millis"]
        shards = sum(len(i["shards"]) for i in manifest["indices"].values())
        rows.append(
            {
                "id": manifest["snapshot"],
                "repository": repo_name,
                "status": manifest["state"],
                "start_epoch": start // 1000,
                "start_time": time.strftime("%H:%M:%S", time.gmtime(start / 1000)),
                "end_epoch": end // 1000,
                "end_time": time.strftime("%H:%M:%S", time.gmtime(end / 1000)),
                "duration": f"{(end - start) / 1000:g}s",
                "indices": len(manifest["indices"]),
                "successful_shards": shards,
                "failed_shards": 0,
                "total_shards": shards,
                "reason": None,
            }
        )
    return rows


def _running_info(manifest: Mapping[str, Any], repo: str) -> dict[str, Any]:
    return {
        "snapshot": manifest["snapshot"],
        "uuid": manifest["uuid"],
        "repository": repo,
        "indices": sorted(manifest["indices"]),
        "state": "IN_PROGRESS",
        "start_time_in_millis": manifest["start_time_in_millis"],
        "failures": [],
        "shards": {"total": 0, "failed": 0, "successful": 0},
    }


def snapshot_status(node: IndicesOwner, repo_name: str | None, expr: str | None) -> dict[str, Any]:
    out = []
    repos = [node.repositories.get(repo_name)] if repo_name else list(node.repositories.current.values())
    for repo in repos:
        if expr is None:
            manifests: list[Mapping[str, Any]] = []
        else:
            manifests = _selected(repo, expr)
        running = [m for m in list(repo.running.values()) if expr is None or m["snapshot"] in expr.split(",")]
        for manifest in [*manifests, *running]:
            out.append(_status(repo.name, manifest))
    return {"snapshots": out}


def _status(repo: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    done = manifest["state"] == "SUCCESS"
    stats = manifest.get("stats") or {}
    counts = manifest.get("counts")
    if counts is not None:
        stats = {
            "file_count": counts.files,
            "size_in_bytes": counts.bytes,
            "incremental_file_count": counts.new_files,
            "incremental_size_in_bytes": counts.new_bytes,
        }
    shards = sum(len(i["shards"]) for i in manifest["indices"].values())
    start = manifest["start_time_in_millis"]
    took = manifest.get("end_time_in_millis", int(time.time() * 1000)) - start
    section = {
        "incremental": {
            "file_count": stats.get("incremental_file_count", 0),
            "size_in_bytes": stats.get("incremental_size_in_bytes", 0),
        },
        "total": {"file_count": stats.get("file_count", 0), "size_in_bytes": stats.get("size_in_bytes", 0)},
        "start_time_in_millis": start,
        "time_in_millis": took,
    }
    return {
        "snapshot": manifest["snapshot"],
        "repository": repo,
        "uuid": manifest["uuid"],
        "state": manifest["state"] if manifest["state"] != "IN_PROGRESS" else "STARTED",
        "include_global_state": manifest.get("include_global_state", True),
        "shards_stats": {
            "initializing": 0,
            "started": 0 if done else shards,
            "finalizing": 0,
            "done": shards if done else 0,
            "failed": 0,
            "total": shards,
        },
        "stats": section,
        "indices": {
            name: {
                "shards_stats": {"done": len(i["shards"]), "failed": 0, "total": len(i["shards"])},
                "shards": {n: {"stage": "DONE" if done else "STARTED"} for n in i["shards"]},
            }
            for name, i in manifest["indices"].items()
        },
    }


def delete_snapshots(node: IndicesOwner, repo_name: str, expr: str) -> dict[str, Any]:
    """Delete snapshots, then every blob no remaining snapshot names (and leftovers of
    snapshots a crash cut short)."""
    repo = node.repositories.get(repo_name)
    for term in expr.split(","):
        if term in repo.running:
            raise ConcurrentSnapshot(f"[{repo_name}:{term}] cannot delete a snapshot while it is running")
    with _locked(repo):
        doomed = _selected(repo, expr)
        folder = repo.location / "snapshots"
        for manifest in doomed:
            (folder / f"{manifest['uuid']}.json").unlink(missing_ok=True)
        fsync_dir(folder)
        _collect_garbage(repo)
    return {"acknowledged": True}


@contextmanager
def _locked(repo: Repository) -> Iterator[None]:
    if not repo.lock.acquire(timeout=30):
        raise ConcurrentSnapshot(f"[{repo.name}] a snapshot is running in this repository")
    try:
        yield
    finally:
        repo.lock.release()


def _collect_garbage(repo: Repository) -> None:
    needed: set[str] = set()
    for manifest in repo.manifests():
        for index in manifest["indices"].values():
            for shard in index["shards"].values():
                for seg in shard["segments"]:
                    needed.update(f["blob"] for f in seg["files"].values())
                    if "live" in seg:
                        needed.add(seg["live"]["blob"])
    for path in (repo.location / "blobs").iterdir():
        if path.name.split(".tmp-")[0] not in needed or ".tmp-" in path.name:
            path.unlink(missing_ok=True)
    for path in (repo.location / "snapshots").glob("*.tmp"):
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# restore


def _java_replacement(text: str) -> str:
    """A Java replacement (`$1`, `\\$` for a dollar) as RE2's (`\\1`)."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        if c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append("\\" + text[i + 1 : j])
            i = j
            continue
        out.append("\\\\" if c == "\\" else c)
        i += 1
    return "".join(out)


def _renamer(body: Mapping[str, Any]) -> Any:
    pattern = body.get("rename_pattern")
    replacement = body.get("rename_replacement")
    if pattern is None and replacement is None:
        return lambda name: name
    if not isinstance(pattern, str) or not isinstance(replacement, str):
        raise IllegalArgument("[rename_pattern] and [rename_replacement] must be strings, and given together")
    options = re2.Options()
    options.log_errors = False
    try:
        compiled = re2.compile(pattern, options)
    except re2.error:
        raise IllegalArgument(f"invalid [rename_pattern] [{pattern}]") from None
    repl = _java_replacement(replacement)

    def rename(name: str) -> str:
        try:
            return compiled.sub(repl, name)
        except (re2.error, IndexError, ValueError):  # `$2` of a pattern with one group
            raise IllegalArgument(f"invalid [rename_replacement] [{replacement}]") from None

    return rename


def restore_snapshot(
    node: IndicesOwner, repo_name: str, snapshot: str, body: Any, *, wait_for_completion: bool
) -> dict[str, Any]:
    from leafsearch.indices.admin import validate_index_name

    repo = node.repositories.get(repo_name)
    if body is not None and not isinstance(body, Mapping):
        raise IllegalArgument("request body must be an object")
    body = body or {}
    allowed = {
        "indices",
        "ignore_unavailable",
        "include_global_state",
        "include_aliases",
        "rename_pattern",
        "rename_replacement",
        "index_settings",
        "ignore_index_settings",
        "partial",
        "feature_states",
        "expand_wildcards",
    }
    for key in body:
        if key not in allowed:
            raise IllegalArgument(f"Unknown parameter {key}")
    manifest = repo.find(snapshot)
    rename = _renamer(body)
    wanted = body.get("indices")
    if isinstance(wanted, list):
        wanted = ",".join(str(w) for w in wanted)
    names = sorted(manifest["indices"])
    streams: dict[str, Any] = manifest.get("streams", {})
    if wanted:
        picked: list[str] = []
        for term in str(wanted).split(","):
            matched = [n for n in names if simple_match(term).fullmatch(n)]
            for stream in [n for n in streams if simple_match(term).fullmatch(n)]:
                matched += streams[stream]["indices"]  # a data stream names its backing indices
            if not matched and "*" not in term and not body.get("ignore_unavailable"):
                raise SnapshotRestoreError(f"[{repo_name}:{snapshot}] index [{term}] not found in snapshot")
            picked += [n for n in matched if n not in picked]
        names = picked
    include_aliases = body.get("include_aliases", True) is not False
    targets = {name: rename(name) for name in names}
    settings_over = body.get("index_settings") or {}
    if not isinstance(settings_over, Mapping):
        raise IllegalArgument("[index_settings] must be an object")
    over = parse_index_settings(settings_over)
    if len(set(targets.values())) != len(targets):
        raise SnapshotRestoreError(f"[{repo_name}:{snapshot}] indices would be restored under the same name")
    with node.lock:
        for target in targets.values():
            validate_index_name(target)
            if target in node.indices:
                raise SnapshotRestoreError(
                    f"[{repo_name}:{snapshot}/{manifest['uuid']}] cannot restore index [{target}] because an "
                    "open index with same name already exists in the cluster. Either close or delete the "
                    "existing index or restore the index under a different name by providing a rename "
                    "pattern and replacement name"
                )
            if target in node.aliases.resolving:
                raise SnapshotRestoreError(
                    f"[{repo_name}:{snapshot}] cannot restore index [{target}] because an alias or data "
                    "stream with the same name exists"
                )
        # A data stream comes back when its backing indices keep their names; renamed, they are
        # plain (hidden) indices.
        kept_streams = {
            name: stream
            for name, stream in streams.items()
            if any(i in targets for i in stream["indices"])
            and all(targets.get(i, i) == i for i in stream["indices"])
        }
        for name in kept_streams:
            if name in node.data_streams.current or name in node.indices or name in node.aliases.current:
                raise SnapshotRestoreError(
                    f"[{repo_name}:{snapshot}] cannot restore data stream [{name}] because a data stream, an "
                    "index or an alias with the same name exists"
                )
        stream_of = {i: name for name, stream in kept_streams.items() for i in stream["indices"]}
        restored: list[Index] = []
        try:
            for source, target in targets.items():
                restored.append(
                    _restore_index(
                        node, repo, manifest["indices"][source], target, over, stream_of.get(source)
                    )
                )
        except BaseException:  # all or nothing: the indices this request created go
            for index in restored:
                node.drop_index(index.name)
            raise
        for name, stream in kept_streams.items():
            data_streams.restore(node, name, stream, [i for i in stream["indices"] if i in targets])
        if include_aliases:
            _restore_aliases(node, manifest, targets)
    shards = sum(index.num_shards for index in restored)
    if not wait_for_completion:
        return {"accepted": True}
    return {
        "snapshot": {
            "snapshot": snapshot,
            "indices": [i.name for i in restored],
            "shards": {"total": shards, "failed": 0, "successful": shards},
        }
    }


def _restore_index(
    node: IndicesOwner,
    repo: Repository,
    entry: Mapping[str, Any],
    name: str,
    over: dict[str, Any],
    data_stream: str | None,
) -> Index:
    settings = {**parse_index_settings(entry["settings"]), **over}  # a manifest is checked as a request
    mapping = IndexMapping.from_body(entry["mappings"])
    index = node.create_index(name, settings, mapping, data_stream=data_stream)
    if index.placement is not None:
        node.drop_index(name)
        raise NotSupported("restoring a snapshot into shards held by Ray actors")
    try:
        index.close_index()
        for shard_no, shard in entry["shards"].items():
            _write_shard(repo, index.folder / shard_no, shard)
        index.open_index()
    except BaseException:  # a blob missing, a full disk: the half-written index goes
        node.drop_index(name)
        raise
    return index


def _write_shard(repo: Repository, folder: Path, shard: Mapping[str, Any]) -> None:
    """A closed shard's folder replaced by the snapshot's segments and a commit naming them."""
    commit = orjson.loads((folder / "commit.json").read_bytes()) if (folder / "commit.json").exists() else {}
    for entry in folder.iterdir():
        if entry.name not in ("translog", "commit.json"):
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    live_files: dict[str, str] = {}
    gen = 0
    for n, seg in enumerate(shard["segments"]):
        seg_folder = folder / seg["name"]
        seg_folder.mkdir(mode=FOLDER_MODE)
        folders = {seg_folder}
        for fname, ref in seg["files"].items():
            *inside, base = fname.split("/")
            if base.startswith(".") or not base or not all(_NESTED_FOLDER.fullmatch(p) for p in inside):
                raise SnapshotRestoreError(f"snapshot file name [{fname}] is not a segment file")
            target = seg_folder.joinpath(*inside)
            if target not in folders:
                target.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
                folders.add(target)
            _copy_blob(repo, ref, target / base)
        for made in sorted(folders, key=lambda f: -len(f.parts)):  # the deepest first
            fsync_dir(made)
        if "live" in seg:
            live_name = f"live_{seg['name']}_{n + 1}.npy"
            _copy_blob(repo, seg["live"], folder / live_name)
            live_files[seg["name"]] = live_name
        digits = seg["name"].rpartition("_")[2]
        gen = max(gen, int(digits) if digits.isdigit() else 0)
    body = {
        "segments": [s["name"] for s in shard["segments"]],
        "live": live_files,
        "max_seq_no": shard["max_seq_no"],
        "segment_gen": gen,
        "live_gen": len(shard["segments"]) + 1,
        "translog_gen": commit.get("translog_gen", 1),
    }
    tmp = folder / "commit.json.tmp"
    with open(tmp, "wb", opener=private) as fh:
        fh.write(orjson.dumps(body))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / "commit.json")
    fsync_dir(folder)


def _copy_blob(repo: Repository, ref: Mapping[str, Any], target: Path) -> None:
    digest = str(ref["blob"])
    if not all(c in "0123456789abcdef" for c in digest):
        raise SnapshotRestoreError(f"blob [{digest}] is not a digest")
    source = repo.blob(digest)
    if not source.exists():
        raise SnapshotRestoreError(f"[{repo.name}] blob [{digest}] is missing from the repository")
    with open(source, "rb") as src, open(target, "wb", opener=private) as dst:
        shutil.copyfileobj(src, dst, _CHUNK)
        dst.flush()
        os.fsync(dst.fileno())


def _restore_aliases(node: IndicesOwner, manifest: Mapping[str, Any], targets: Mapping[str, str]) -> None:
    from leafsearch.indices.aliases import AliasMetadata

    table = {alias: dict(members) for alias, members in node.aliases.current.items()}
    changed = False
    for source, target in targets.items():
        for alias, body in manifest["indices"][source].get("aliases", {}).items():
            if alias in node.indices:
                continue
            table.setdefault(alias, {})[target] = AliasMetadata.from_body(body)
            changed = True
    if changed:
        node.aliases.publish(table, node.indices)
