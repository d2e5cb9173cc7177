//go:build tools

// Package tools pins the upstream etcd server command package.
package tools

import _ "go.etcd.io/etcd/server/v3"
