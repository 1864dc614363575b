"""gangsched: a gang scheduler for Kubernetes.

Pods that set ``schedulerName: gang`` are placed all-or-nothing with the rest
of their gang; every other pod stays with kube-scheduler.
"""

__version__ = "0.2.0"
