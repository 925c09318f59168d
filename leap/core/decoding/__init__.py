"""leap.core.decoding: the decoder - draft, verify, accept, roll back, feed back - and its costs.

Owns :class:`~leap.core.decoding.decoder.SelfSpecDecoder` (a model, a configuration or drafter, a
draft policy), :class:`~leap.core.decoding.session.DecodingSession` (one prompt's state and step),
the :class:`~leap.core.decoding.outcome.GenerationOutcome` / ``StepRecord`` records, and
:mod:`~leap.core.decoding.calibrate`, which measures this machine's costs by timing real forwards
and drafters (``leap calibrate``), and :class:`~leap.core.decoding.batch.BatchDecoder` (B requests decoded
together, each row lossless; ``leap bench --batch-size``).

May import: everything else in :mod:`leap.core`; it is the top of the core's dependency order, and
:mod:`leap.search`, :mod:`leap.envs` and :mod:`leap.bench` import it.
"""
