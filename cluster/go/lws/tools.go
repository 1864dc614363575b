//go:build tools

// Package tools pins the LeaderWorkerSet controller manager the end-to-end suite builds.
package tools

import (
	_ "sigs.k8s.io/lws/cmd"
)
