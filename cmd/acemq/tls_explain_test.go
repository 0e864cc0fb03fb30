package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainTLS: each way a TLS dial fails gets the hint an operator can
// act on. The client certificate's hint comes from what the server says
// to a handshake without one, not from the AMQP client's error, which
// names whatever it was doing when the server hung up: a server that
// requires a certificate gets the hint whatever that error said, one that
// does not never does, nor does a command that gave a certificate.
func TestExplainTLS(t *testing.T) {
	t.Parallel()
	requiring := tlsServer(t, tls.RequireAnyClientCert)
	open := tlsServer(t, tls.NoClientCert)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: requiring.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	// httptest's servers share one certificate, so one CA trusts both.
	flags := func(cert bool) *flag.FlagSet {
		fs := flag.NewFlagSet("peek", flag.ContinueOnError)
		fs.String("tls-ca", ca, "")
		if cert {
			fs.String("tls-cert", "client.pem", "")
		}
		return fs
	}
	amqps := func(s *httptest.Server) string { return "amqps://u:p@" + strings.TrimPrefix(s.URL, "https://") + "/" }
	a := &app{ctx: context.Background(), getenv: func(string) string { return "" }}
	tests := []struct {
		name string
		fs   *flag.FlagSet
		url  string
		err  string
		want string // "" for no hint
	}{
		{"unknown authority", flags(false), amqps(open), "x509: certificate signed by unknown authority", "--tls-ca"},
		{"wrong name", flags(false), amqps(open), "x509: certificate is valid for rabbit-1, not localhost", "--tls-server-name"},
		{"reset, certificate required", flags(false), amqps(requiring), "read: connection reset by peer", "may require a client certificate"},
		{"closed network connection, certificate required", flags(false), amqps(requiring), "use of closed network connection", "may require a client certificate"},
		{"a frame error, certificate required", flags(false), amqps(requiring), `Exception (502) Reason: "invalid field or value inside of a frame"`, "may require a client certificate"},
		{"https, certificate required", flags(false), requiring.URL, "EOF", "may require a client certificate"},
		{"reset, no certificate required", flags(false), open.URL, "read: connection reset by peer", ""},
		{"certificate given", flags(true), amqps(requiring), "use of closed network connection", ""},
		{"nobody listening", flags(false), "amqps://127.0.0.1:1/", "dial tcp: connection refused", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := a.explainTLS(tt.fs, tt.url, errors.New(tt.err)).Error()
			if tt.want == "" && got != tt.err || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("explainTLS(%q) = %q, want a hint with %q", tt.err, got, tt.want)
			}
		})
	}
}

// tlsServer is a TLS server asking for client certificates as auth says.
func tlsServer(t *testing.T, auth tls.ClientAuthType) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.TLS = &tls.Config{ClientAuth: auth}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}
