"""leap.bench: the Spec-Bench harness (``leap bench``) and its report (``leap report``).

* :mod:`leap.bench.methods` - every benchmark method by name (plain decoding, LEAP and its ablations,
  every search agent and drafter); :mod:`leap.bench.peers` - transformers' ``generate`` as peers;
* :mod:`leap.bench.harness` - runs them interleaved per prompt, appends JSONL records, resumes;
* :mod:`leap.bench.records` - the record format;
* :mod:`leap.bench.report` - LEAP's Table 1 / Table 2, CSV, plots;
* :mod:`leap.bench.smoke` - every path at real size (``leap smoke``); :func:`leap.bench.stats.compare` - ``--compare``.

May import: everything below it (:mod:`leap.core`, :mod:`leap.redundancy`, :mod:`leap.search`,
:mod:`leap.envs`); only :mod:`leap.cli` imports it.
"""
