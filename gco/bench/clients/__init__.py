"""The timed clients: `bench serve` (an async streaming OpenAI-API client timing TTFT, ITL, e2e and
decode tok/s, in single or load mode, over a small keep-alive HTTP/1.1 transport), `bench clip`
(whole clips of a video engine, one POST at a time), the prompt and clip sets they send, the arrival
schedules of load mode, and the per-request records and results they write. They know nothing of
rounds, launches or statistics.
"""
