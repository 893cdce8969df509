"""The fake engine's prefix cache: hash-chained blocks in a bounded LRU, as vLLM's is.

vLLM's automatic prefix caching (docs.vllm.ai, "Automatic Prefix Caching", design: each KV block is
identified by the hash of its own tokens and of every token before it, and freed blocks are evicted
least recently used first) finds how many leading blocks of a prompt are cached by chaining a
block's hash to its parent's. Here a block is `BLOCK_CHARS` characters (the fake engine has no
tokenizer) and the cache holds at most `capacity` block hashes, so its memory is bounded whatever
it is sent: keeping every prefix as a string (as before) grew quadratically with a prompt's length.
It counts what vLLM's `prefix_cache_queries` and `prefix_cache_hits` count (blocks looked up, and
the leading ones found); it does not model KV memory or a block's reference count.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

BLOCK_CHARS = 16
CAPACITY = 65_536  # block hashes kept: 16-byte digests, a few MB at most
_ROOT = b"\x00" * 16


class PrefixBlocks:
    """Bounded, hash-chained prefix blocks: `lookup_and_insert` answers (queried, hit) blocks."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup_and_insert(self, prompt: str) -> tuple[int, int]:
        """Look up every whole block of `prompt` (hits: the leading blocks cached), then cache them
        all as most recently used, evicting the least recently used beyond `capacity`.

        Returns:
            (blocks queried, leading blocks found).
        """
        parent, hits, missed = _ROOT, 0, False
        whole = len(prompt) // BLOCK_CHARS
        for index in range(whole):
            block = prompt[index * BLOCK_CHARS : (index + 1) * BLOCK_CHARS].encode("utf-8", "surrogatepass")
            parent = hashlib.blake2b(parent + block, digest_size=16).digest()
            if not missed and parent in self._blocks:
                hits += 1
            else:
                missed = True
            self._blocks[parent] = None
            self._blocks.move_to_end(parent)
            if len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)
        return whole, hits
