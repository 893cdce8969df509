"""What the numbers and the logs say, as pure functions: round statistics (medians with bootstrap
CIs, paired ratios, the adaptive stop rule), Prometheus /metrics differences, and an engine's
start-up log read together with the command that launched it (the argument dumps' syntax, the
launch facts, the hard gates each engine family's logged settings decide). No process, no HTTP.
"""
