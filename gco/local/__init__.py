"""The embedded stack for one machine: a local AWS endpoint and the walk-through that uses it."""
