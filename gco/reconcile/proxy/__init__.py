"""The Region's shared inference proxy and its routes: the proxy's objects (`render_proxy`; its
settings are `gco.reconcile.proxy.proxy_settings`, beside the other render settings), its fixed
nginx.conf (`proxy_conf`), each endpoint's route as read from its Ingress (`routes`), the route
shards the proxy reads (`route_shards`) and the port and adapter that store them (`route_store`),
the route keeper that keeps them equal to the routes (`route_keeper`, fed `route_changes` by the
endpoint reconciler), and the probe that asks the proxy's pods what they serve (`proxy_probe`).
Nothing is imported here, so a module of the wing is loaded only when used.
"""
