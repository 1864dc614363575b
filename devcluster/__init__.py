"""A local Kubernetes control plane (etcd, kube-apiserver, KWOK, optionally
kube-scheduler and kube-controller-manager) for tests, the demo and benchmarks."""
