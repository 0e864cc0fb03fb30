package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestExplainTLS: each way a TLS dial fails gets the hint an operator can
// act on; a client certificate's hint only when none was given.
func TestExplainTLS(t *testing.T) {
	t.Parallel()
	noCert := flag.NewFlagSet("peek", flag.ContinueOnError)
	withCert := flag.NewFlagSet("peek", flag.ContinueOnError)
	withCert.String("tls-cert", "client.pem", "")
	a := &app{getenv: func(string) string { return "" }}
	tests := []struct {
		name string
		fs   *flag.FlagSet
		err  string
		want string // "" for no hint
	}{
		{"unknown authority", noCert, "x509: certificate signed by unknown authority", "--tls-ca"},
		{"wrong name", noCert, "x509: certificate is valid for rabbit-1, not localhost", "--tls-server-name"},
		{"reset, no certificate", noCert, "read: connection reset by peer", "may require a client certificate"},
		{"certificate required alert", noCert, "remote error: tls: certificate required", "may require a client certificate"},
		{"closed as the AMQP handshake began", noCert, `Exception (504) Reason: "channel/connection is not open"`, "may require a client certificate"},
		{"closed, a certificate given", withCert, `Exception (504) Reason: "channel/connection is not open"`, ""},
		{"something else", noCert, "dial tcp: connection refused", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := a.explainTLS(tt.fs, errors.New(tt.err)).Error()
			if tt.want == "" && got != tt.err || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("explainTLS(%q) = %q, want a hint with %q", tt.err, got, tt.want)
			}
		})
	}
}
