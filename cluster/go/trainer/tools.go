//go:build tools

// Package tools pins the Kubeflow Trainer and JobSet commands the end-to-end suite builds.
package tools

import (
	_ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
	_ "sigs.k8s.io/jobset"
)
