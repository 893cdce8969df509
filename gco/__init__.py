"""gco: LLM inference endpoints on EKS GPU node groups across AWS Regions.

The library holds pure logic and narrow ports; nothing here imports CDK or calls AWS at import time.
"""

__version__ = "0.1.0"
