// Package apiclient is the Go client that oapi-codegen generates from
// openapi.yaml, checked in so that its users and its tests see the
// contract as a generator reads it. Its tests regenerate it (it cannot
// drift from the spec), drive a running server through it, lint the spec
// with Redocly and type-check the TypeScript types openapi-typescript
// generates from it.
//
// Do not edit client.gen.go; change openapi.yaml and run go generate.
package apiclient

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../openapi.yaml
