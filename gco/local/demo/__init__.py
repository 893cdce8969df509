"""The walk-through of `gco local demo` (`demo`): the main job run end to end on the embedded stack
(the moto server and each Region's runtime in this process, the real `gco` commands in
subprocesses), each step checked, closed by `gco bench rounds` of two local engines whose inputs
`demo_bench` writes. It sits on top of the local stack's wings; nothing of the stack imports it.
"""
