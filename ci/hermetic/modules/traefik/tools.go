//go:build tools

// Package tools pins the upstream command packages this wrapper builds.
package tools

import (
	_ "github.com/traefik/traefik/v3/cmd/traefik"
)
