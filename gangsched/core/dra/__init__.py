"""Dynamic Resource Allocation in the pure core: devices, claims, and their allocation.

kube-scheduler's DynamicResources plugin and the structured allocator it uses
(``k8s.io/dynamic-resource-allocation/structured``) are the model: a claim's
requests are matched against the devices drivers publish in ResourceSlices,
through the CEL selectors of the request and its DeviceClass, and a claim is
allocated on one node at a time. Here the allocation is part of the gang's
placement, so a gang's nodes and devices are chosen together, all or nothing.
"""
