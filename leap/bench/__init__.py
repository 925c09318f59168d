"""leap.bench: the Spec-Bench harness (``leap bench``) and its report (``leap report``).

* :mod:`leap.bench.methods` - every benchmark method by name (plain decoding, LEAP and its ablations,
  every search agent and drafter, transformers' assisted-generation peers);
* :mod:`leap.bench.harness` - runs them interleaved per prompt, appends JSONL records, resumes;
* :mod:`leap.bench.records` - the record format;
* :mod:`leap.bench.report` - LEAP's Table 1 / Table 2, CSV, plots.
"""
