//go:build tools

// Package tools pins the mpi-operator command the end-to-end suite builds.
package tools

import (
	_ "github.com/kubeflow/mpi-operator/cmd/mpi-operator"
)
