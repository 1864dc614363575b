"""A gang placed whole on the cycle's snapshot or not at all, and the gangs whose
eviction would make room for it.
"""
