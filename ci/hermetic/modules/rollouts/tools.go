//go:build tools

// Package tools pins the upstream command packages this wrapper builds.
package tools

import (
	_ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
	_ "github.com/argoproj/argo-rollouts/cmd/kubectl-argo-rollouts"
)
