//go:build tools

// Package tools pins the Volcano commands the peer comparisons build.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
