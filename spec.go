// Package coordsidecar holds what the whole module shares: the HTTP contract.
package coordsidecar

import _ "embed"

// OpenAPI is openapi.yaml, the contract the server implements, served at
// GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
