"""The local stack's own process pieces: the listen backlog and the rare full garbage collections of
its stand-in servers (the moto server, the stand-in API servers), the state directory's lock with its
record of every process `gco local up` starts, the state files read through their models
(`statefiles`), and the cache home of what is built once per machine (`cache`). Identity, signals and
stops are the shared library's (`gco.processes`). They import nothing of the stack but its errors.
"""
