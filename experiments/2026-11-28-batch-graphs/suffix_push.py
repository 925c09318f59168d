"""What ``suffix``'s trie costs a pushed token (a batch pushes every row's accepted tokens each step, a request its whole
prompt at its start): one trie built from 4000 random tokens (ids below 200), ``max_depth`` 24 (the drafter's
default), best of 25.

    python experiments/2026-11-28-batch-graphs/suffix_push.py
"""
import random, time
from leap.core.drafters.suffix import SuffixTrie
random.seed(0)
toks = [random.randrange(200) for _ in range(4000)]
best = 1e9
for _ in range(25):
    t = time.perf_counter(); tr = SuffixTrie(24); tr.add(toks); best = min(best, time.perf_counter() - t)
print("push: %.2f us a token (best of 25, 4000 tokens, max_depth 24)" % (1e6 * best / len(toks)))
