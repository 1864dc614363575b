"""What a step reports, and when; why one gang waits, in depth.
"""
