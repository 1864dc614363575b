"""The plain data the core reasons about: quantities, resource vectors in integer
canonical units, pods, nodes, gangs, queues and claims, expected runtimes.
"""
