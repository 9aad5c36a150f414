"""What the write path uses beside its request, handed in by the Node that owns it, so that nothing
in `write/` knows the Node: the indices and aliases a write names, the rules and settings it
follows, the indexing slot bulk requests take turns in, and the search side by-query operations
read their snapshot through."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from leafsearch.common.settings import ClusterSettings
    from leafsearch.index.index import Index
    from leafsearch.indices.aliases import AliasTable
    from leafsearch.scripts.service import StoredScripts
    from leafsearch.search.services import CoordinatorServices
    from leafsearch.services.idle_cpu import IdleCpu
    from leafsearch.services.tasks import TaskManager


@dataclass(kw_only=True, eq=False)
class WriteServices:
    #: The node's live table of indices (the Node adds and removes entries; never replaced).
    indices: dict[str, Index]
    aliases: AliasTable
    cluster_settings: ClusterSettings
    #: Bulk requests parse and apply their operations one at a time (the work holds the
    #: interpreter); their fsyncs and refreshes overlap.
    indexing: threading.Lock
    #: Idle CPU lately: bulk parsing moves to the search workers only while a core has time to spare.
    idle_cpu: IdleCpu
    #: Creates the index a write names when it does not exist, as `action.auto_create_index`
    #: allows (`indices.admin.auto_create_index` on the node).
    auto_create: Callable[[str], Index]
    #: By-query operations read their snapshot, and bulk parsing runs in the workers, through these.
    search: CoordinatorServices
    #: By-query operations and reindex run as tasks.
    tasks: TaskManager
    #: Updates and by-query operations run scripts, inline or stored.
    scripts: StoredScripts
