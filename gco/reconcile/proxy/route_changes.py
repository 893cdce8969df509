"""What reconciles changed in a Region's routes, and that change merged into the proxy's route table.

After a batch the route keeper (`route_keeper.py`) merges the batch's own changes into the route
shards they touch instead of listing every route of the Region: the cost of a refresh then follows
the batch, not the Region's size. A change is known exactly from what the batch did:

- it applied an endpoint's route Ingress (`route-<name>`): the endpoint's route is the one the API
  server answered with (None when that answer serves no route: invalid, terminating);
- it deleted an endpoint's route Ingress: the endpoint has no route.

Anything whose effect is not known that way (an apply or delete that failed, so the API server
may or may not have made the change; the deletion of an Ingress gco never renders) sets
`rebuild`, and the keeper rebuilds every shard from the listed routes, as the sweep always does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from gco.reconcile.proxy.routes import Route, RouteTable


@dataclass
class RouteChanges:
    """Each changed endpoint's route now (None: it has none), in the order the changes were made.

    `rebuild`: some change is not known exactly; the table must be rebuilt from the route objects.
    """

    routes: dict[str, Route | None] = field(default_factory=dict)
    rebuild: bool = False

    def __bool__(self) -> bool:
        return self.rebuild or bool(self.routes)

    def put(self, endpoint: str, route: Route | None) -> None:
        """Record the endpoint's route now; it replaces any earlier change of that endpoint."""
        self.routes.pop(endpoint, None)  # re-inserted last: the order is the order of the changes
        self.routes[endpoint] = route

    def update(self, later: RouteChanges) -> None:
        """Add changes made after these (a later change of an endpoint wins)."""
        for endpoint, route in later.routes.items():
            self.put(endpoint, route)
        self.rebuild = self.rebuild or later.rebuild

    def merged_into(self, table: RouteTable) -> RouteTable | None:
        """`table` with each changed endpoint's routes replaced by its route now.

        None when the merge cannot decide what a rebuild from the route objects would: two
        endpoints' routes claim one path (a rebuild keeps the one whose Ingress name sorts last,
        and the other's comes back when that one goes), or a route names another endpoint.
        """
        if self.rebuild:
            return None
        by_path = {route.path: route for route in table.routes if route.endpoint not in self.routes}
        for endpoint, route in self.routes.items():
            if route is None:
                continue
            if route.endpoint != endpoint or route.path in by_path:
                return None
            by_path[route.path] = route
        return RouteTable(routes=tuple(by_path[path] for path in sorted(by_path)))


class PendingRouteChanges:
    """The route changes of one execution environment not yet in the proxy's table, and its batches.

    Thread-safe: batches record their changes as they end, and whoever refreshes the table takes
    them all (a failed refresh puts them back, ahead of any recorded since). Batches that run at
    once share one refresh, made by the last to end (`end_batch`); a change that has waited
    `max_delay` seconds is refreshed by the next batch to end even while others run, so batches
    that keep overlapping never starve the table.

    Parameters:
        max_delay: the longest a change waits for the last concurrent batch to end.
        clock: monotonic seconds (injected in tests).
    """

    def __init__(self, *, max_delay: float, clock: Callable[[], float]) -> None:
        self.max_delay = max_delay
        self._clock = clock
        self._lock = threading.Lock()
        self._changes = RouteChanges()
        self._stale = threading.Event()  # set with every change recorded, cleared when taken
        self._since: float | None = None  # when the oldest change waiting was recorded
        self._batches = 0  # batches running

    @property
    def stale(self) -> bool:
        """Whether any change waits for a refresh."""
        return self._stale.is_set()

    def record(self, changes: RouteChanges) -> None:
        with self._lock:
            self._record_locked(changes)

    def take(self) -> RouteChanges:
        """Every change waiting, for a refresh; none waits after this."""
        with self._lock:
            taken, self._changes = self._changes, RouteChanges()
            self._stale.clear()
            self._since = None
            return taken

    def restore(self, taken: RouteChanges) -> None:
        """Changes a failed refresh took, recorded again ahead of any recorded since."""
        if not taken:
            return
        with self._lock:
            taken.update(self._changes)
            self._changes = taken
            if self._since is None:
                self._since = self._clock()
            self._stale.set()

    def begin_batch(self) -> None:
        with self._lock:
            self._batches += 1

    def end_batch(self, changes: RouteChanges) -> bool:
        """Record a batch's changes as it ends; whether it refreshes the table now.

        It does when it is the last batch running (counting and recording under one lock, so the
        last batch sees every change recorded before it), when the oldest change waiting is
        `max_delay` old, and for what an earlier failed refresh left.
        """
        with self._lock:
            self._batches -= 1
            if changes:
                self._record_locked(changes)
            if not self._stale.is_set():
                return False
            waited = 0.0 if self._since is None else self._clock() - self._since
            return self._batches == 0 or waited >= self.max_delay

    def _record_locked(self, changes: RouteChanges) -> None:
        if not self._stale.is_set():
            self._since = self._clock()
        self._changes.update(changes)
        self._stale.set()
