//go:build tools

// Package tools pins the upstream Argo CD multi-call command package.
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
