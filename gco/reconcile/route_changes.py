"""What reconciles changed in a Region's routes, and that change merged into the proxy's route table.

After a batch the reconciler refreshes the proxy's route table from the batch's own changes
(`system.refresh_route_table`) instead of listing every route of the Region: the cost of a refresh
then follows the batch, not the Region's size. A change is known exactly from what the batch did:

- it applied an endpoint's route Ingress (`route-<name>`): the endpoint's route is the one the API
  server answered with (None when that answer serves no route: invalid, terminating);
- it deleted an endpoint's route Ingress: the endpoint has no route.

Anything whose effect is not known that way (an apply or delete that failed, so the API server
may or may not have made the change; the deletion of an Ingress gco never renders) sets
`rebuild`, and the refresh lists every route instead, as the sweep always does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gco.reconcile.routes import Route, RouteTable


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
