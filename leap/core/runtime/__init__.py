"""leap.core.runtime: the machine - device-safe transfers, step clocks and the cost record.

Owns :mod:`~leap.core.runtime.device` (the one explicit device-to-host helper, ``StepClock`` with one
synchronisation per step, ``wall_clock``), :mod:`~leap.core.runtime.costs` (the
:class:`~leap.core.runtime.costs.Calibration` record and its cost model; measured by
:mod:`leap.core.decoding.calibrate`) and :mod:`~leap.core.runtime.host_transfers` (the static check
for implicit transfers that the tests run over ``leap/``) and :mod:`~leap.core.runtime.provenance`
(the commit, versions, device and date every record carries).

May import: torch, numpy and the foundations only; everything else in leap may import it.
"""
