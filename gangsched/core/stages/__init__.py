"""The stages of one scheduling cycle, one module each, siblings over a shared session.

In the manner of Volcano's actions: :mod:`.session` holds the cycle's mutable
bookkeeping, and each stage (:mod:`.triage`, :mod:`.admit`, :mod:`.place`,
:mod:`.backfill`, :mod:`.preempt`, :mod:`.reclaim`, :mod:`.starve`) is a module
with one entry point over it that calls no other stage; :mod:`.order` says whose
turn it is. :func:`gangsched.core.stages.cycle.run_cycle` runs them in order. What
a stage only tries it tries under a :mod:`.statement`, committed or discarded whole.
"""
