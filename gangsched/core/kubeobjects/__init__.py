"""API objects (plain JSON dicts) turned into core model objects, once, at the edge.

Everything the core reasons about is decided here: a pod's effective request
is computed the way kube-scheduler computes it, quantities become integers,
selectors and tolerations become frozen tuples. After this nothing downstream
re-reads a dict, so a malformed object fails here, with a message naming the
object and the field, and never as a ``KeyError`` deep inside a cycle.

Only :class:`ObjectError` escapes for bad input, whatever its shape: the
shell can then skip (and report) one broken object without a catch-all.

One module per kind of object; :mod:`.fields` reads the fields they share.
"""
