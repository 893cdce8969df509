"""The process helpers of the local stack: stopping a child (SIGTERM, then SIGKILL after a grace),
the listen backlog and the rare full garbage collections of its stand-in servers (the moto server,
the stand-in API servers), and the state directory's lock with its record of every process `gco
local up` starts. They import nothing of the stack but its errors.
"""
