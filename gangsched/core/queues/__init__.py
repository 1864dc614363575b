"""The queue tree and the fair order between queues.
"""
