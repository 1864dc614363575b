"""The pure scheduling core: plain data in, decisions out.

Nothing under this package does I/O, reads a clock, draws a random number or
logs; an import-linter contract holds that line. The shell feeds it frozen
snapshots and acts on what it returns.
"""
