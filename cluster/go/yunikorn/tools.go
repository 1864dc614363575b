//go:build tools

// Package tools pins the YuniKorn command the peer comparisons build.
package tools

import (
	_ "github.com/apache/yunikorn-k8shim/pkg/cmd/shim"
)
