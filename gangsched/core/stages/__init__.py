"""The stages of one scheduling cycle, one module each, over a shared session.

In the manner of Volcano's actions: :mod:`.session` holds the cycle's mutable
bookkeeping, and each stage (:mod:`.triage`, :mod:`.allocate`, :mod:`.admit`,
:mod:`.place`, :mod:`.preempt`, :mod:`.starve`) is a module with one entry
point over it. :func:`gangsched.core.stages.cycle.run_cycle` calls them in order.
"""
