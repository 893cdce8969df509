"""`bench rounds`: the run manifest and options, the Williams design that orders the engines, one
cell per engine and round (launch, ready, warm up, measure with a client subprocess, scrape, stop,
check the GPU and its lock), and what a run yields: the summary over rounds, its limitations, the
run data and the evidence records (of `bench serve` and `bench clip` too). `run.run_rounds` is the
whole run.
"""
