package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// Environment variables read when the TLS flags are not given.
const (
	EnvTLSCA         = "ACEMQ_TLS_CA"
	EnvTLSCert       = "ACEMQ_TLS_CERT"
	EnvTLSKey        = "ACEMQ_TLS_KEY"
	EnvTLSServerName = "ACEMQ_TLS_SERVER_NAME"
)

// tlsSettings are the TLS flags' values, or their environment
// variables'.
type tlsSettings struct {
	ca, cert, key, serverName string
}

// tlsFlags adds the TLS flags to fs, a command that talks to a broker.
func tlsFlags(fs *flag.FlagSet) {
	fs.String("tls-ca", "", "PEM file of the CA that signed the broker's certificate, for amqps:// and an https management API (default $"+EnvTLSCA+"; else the system's CAs)")
	fs.String("tls-cert", "", "PEM file of the client certificate, for a broker that requires one (default $"+EnvTLSCert+"; with --tls-key)")
	fs.String("tls-key", "", "PEM file of the client certificate's private key (default $"+EnvTLSKey+")")
	fs.String("tls-server-name", "", "the name the broker's certificate must carry, when it is not the URL's host (default $"+EnvTLSServerName+")")
}

// tlsInUse are fs's TLS flags, each falling back on its environment
// variable.
func (a *app) tlsInUse(fs *flag.FlagSet) tlsSettings {
	var s tlsSettings
	for _, f := range []struct {
		v         *string
		flag, env string
	}{{&s.ca, "tls-ca", EnvTLSCA}, {&s.cert, "tls-cert", EnvTLSCert}, {&s.key, "tls-key", EnvTLSKey}, {&s.serverName, "tls-server-name", EnvTLSServerName}} {
		if fl := fs.Lookup(f.flag); fl != nil {
			*f.v = fl.Value.String()
		}
		if *f.v == "" {
			*f.v = a.getenv(f.env)
		}
	}
	return s
}

// tlsConfig is the TLS configuration the flags ask for, or nil when none
// is given (amqps:// and https:// then verify against the system's CAs).
func (a *app) tlsConfig(fs *flag.FlagSet) (*tls.Config, error) {
	s := a.tlsInUse(fs)
	if s == (tlsSettings{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.serverName}
	if s.ca != "" {
		pem, err := os.ReadFile(s.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", s.ca)
		}
	}
	if (s.cert == "") != (s.key == "") {
		return nil, errors.New("--tls-cert and --tls-key go together: the certificate and its private key")
	}
	if s.cert != "" {
		pair, err := tls.LoadX509KeyPair(s.cert, s.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// explainTLS adds to an error of a TLS connection to rawURL what the
// operator can do about it. A broker that requires a client certificate
// (RabbitMQ's ssl_options.fail_if_no_peer_cert) and gets none ends the
// handshake with an alert; Go's TLS 1.3 client, whose handshake is done
// before the server has looked at the certificate, sees the alert only
// when it reads, and the AMQP client reports whatever it was doing then
// (EOF, a reset, a closed connection, an unparseable frame). So without a
// client certificate the error is not guessed from: probeTLS shakes hands
// once more and reads the server's answer itself.
func (a *app) explainTLS(fs *flag.FlagSet, rawURL string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return fmt.Errorf("%w (give the CA that signed the broker's certificate with --tls-ca or $%s)", err, EnvTLSCA)
	case strings.Contains(msg, "certificate is valid for"), strings.Contains(msg, "certificate is not valid for"):
		return fmt.Errorf("%w (give the name the certificate carries with --tls-server-name or $%s)", err, EnvTLSServerName)
	case a.tlsInUse(fs).cert == "" && a.probeTLS(fs, rawURL) == errCertificateWanted:
		return fmt.Errorf("%w (the broker may require a client certificate: give --tls-cert and --tls-key, or $%s and $%s)", err, EnvTLSCert, EnvTLSKey)
	}
	return err
}

// greetings are what a client says first, by scheme, so that a server
// that accepted the handshake answers.
var greetings = map[string][]byte{
	"amqps": []byte("AMQP\x00\x00\x09\x01"),
	"https": []byte("HEAD / HTTP/1.0\r\n\r\n"),
}

// errCertificateWanted is probeTLS's finding that the server refused a
// handshake without a client certificate.
var errCertificateWanted = errors.New("the server wants a client certificate")

// probeTLS shakes hands with rawURL's host as fs's flags say, greets it
// and reads until the server speaks or 5 seconds pass. It returns
// errCertificateWanted when the server refused for want of a client
// certificate (TLS 1.3's certificate_required alert, TLS 1.2's
// handshake_failure or bad_certificate), else nil or another error.
func (a *app) probeTLS(fs *flag.FlagSet, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"amqps": "5671", "https": "443"}[u.Scheme]
	}
	cfg, err := a.tlsConfig(fs)
	if err != nil {
		return err
	}
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err == nil {
		defer conn.Close()
		deadline, _ := ctx.Deadline()
		_ = conn.SetDeadline(deadline)
		// A greeting makes a willing server answer at once; a refusing
		// one's alert is read first, whether or not the write got there.
		_, _ = conn.Write(greetings[u.Scheme])
		_, err = conn.Read(make([]byte, 1))
	}
	if err == nil {
		return nil
	}
	for _, alert := range []string{"remote error: tls: certificate required", "remote error: tls: bad certificate", "remote error: tls: handshake failure"} {
		if strings.Contains(err.Error(), alert) {
			return errCertificateWanted
		}
	}
	return err
}

type tlsKey struct{}

// withTLS carries the TLS configuration to the dialer: the dialer's
// signature is the tests' too, which dial memory brokers.
func withTLS(ctx context.Context, cfg *tls.Config) context.Context {
	if cfg == nil {
		return ctx
	}
	return context.WithValue(ctx, tlsKey{}, cfg)
}

// tlsFrom is the configuration withTLS put in ctx, cloned (the AMQP client
// writes the server name into the one it is given), or nil.
func tlsFrom(ctx context.Context) *tls.Config {
	if cfg, ok := ctx.Value(tlsKey{}).(*tls.Config); ok {
		return cfg.Clone()
	}
	return nil
}
