"""What the numbers and the logs say, as pure functions: round statistics (medians with bootstrap
CIs, paired ratios, the adaptive stop rule), Prometheus /metrics differences, and an engine's
start-up log read together with the command that launched it (the launch facts, and the hard gates
its logged settings decide; each framework's log formats are its own, in `logrules`, found by
framework name). No process, no HTTP.
"""
