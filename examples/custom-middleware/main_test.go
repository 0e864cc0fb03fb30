package main

import (
	"bytes"
	"testing"
)

func TestCustomMiddleware(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := `handler: invoice for tenant acme
audit: {"n":1} attempt 1 → accept
audit: {"n":2} attempt 1 → dead-letter: the handler rejected it: no x-tenant header
audit: n=3 attempt 1 → park: could not be decoded: acemq: this message is not JSON: 3 bytes that do not parse
`
	if out.String() != want {
		t.Errorf("output\n%s\nwant\n%s", out.String(), want)
	}
}
