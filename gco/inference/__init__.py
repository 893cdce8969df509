"""Reaching a served endpoint from outside: its URLs in each Region and one request to it.

`regional_outputs` reads each Region's invoke URL from its Regional stack's outputs and names the
URLs `gco inference status` shows (`endpoint_urls`); `invoke` sends one request through a Region's
way in (SigV4 in AWS, the local proxies on the local stack). The CLI, the rollouts' traffic, the
validation matrix and the local stack's walk-through call them. Their errors are drawn in
`gco/errors.py`.
"""
