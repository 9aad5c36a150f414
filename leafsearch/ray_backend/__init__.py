"""An index's shards as Ray actors: the node as the coordinator of a Ray cluster (`serve --ray`).

Only imported when a node is started with Ray (`Node(path, ray=...)`), so the default install
and the embedded mode never import Ray (the `leafsearch[ray]` extra installs it):

- `actor.py`: `ShardActor`, one engine `Shard` in its own folder on the Ray node it is pinned
  to, serving the shard write interface (index/shard_write.py) and the shard search interface
  (search/shard_api.py);
- `remote.py`: the coordinator's side: the index's shards as `RemoteShard`s, their snapshots as
  `RemoteSnapshot` leases, and `RayShard`, the `ShardSearch` client the search code calls;
- `cluster.py`: `RayBackend`, the node's connection to the cluster: placement of new shards,
  creation and lookup of their actors by name, removal with their index;
- `replication.py`: replicas: the shard map (copies, primary, in-sync set, primary term) as a
  versioned metadata entry, its compare-and-set edits, what a replicated write carries;
- `fault_detection.py`: `FailureDetector`, which machines failed (Elasticsearch's follower
  checks, per coordinator): only a failed machine's primaries are replaced;
- `metadata.py`: `MetadataActor`, the cluster's metadata in one place for every coordinator
  (indices, aliases, users, API keys, reader contexts), and `MetadataClient`, a coordinator's
  handle on it.

docs/ARCHITECTURE.md ("Shards as Ray actors") says why the design is what it is.
"""
