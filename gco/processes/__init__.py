"""The one process library of gco: start a process so that it can be proven ours, read what Linux
says of it, signal it only once proven, and stop it (SIGTERM, then SIGKILL after a grace).

`proc` reads /proc (a process's state, parent, group and start time); `identity` is a process gco
started (`Started`: its pid and the start time the kernel gave it) and the check that a pid still
names that process; `signals` sends a signal only after that check, and stops groups and children;
`launch` starts an engine-like process in a clean environment and a group of its own;
`interpreter` is the command line of every Python child (`-P`: safe from the working directory). The
benchmarks (`gco.bench`) and the local stack (`gco.local`) both use it; it imports nothing of gco
but `gco.errors` (an import contract in pyproject.toml holds it, see docs/layout.md).
"""
