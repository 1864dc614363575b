"""Which nodes a pod may go to, whatever their room: node fit, inter-pod rules,
host ports, disks and volumes, as kube-scheduler's filters decide them.
"""
