package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
)

// TestRabbitMQTLS: against a private node that requires a client
// certificate (ssl_options verify_peer and fail_if_no_peer_cert, the
// management API over https likewise), the CLI connects with the TLS
// flags, and with their environment variables; without a client
// certificate, or trusting another CA, it fails saying what to give. Not
// parallel: it sets the environment.
func TestRabbitMQTLS(t *testing.T) {
	rabbitURL(t) // gates as every RabbitMQ test does
	n, err := brokertest.StartTLSNode()
	if err != nil {
		t.Fatalf("start a TLS node: %v", err)
	}
	t.Cleanup(n.Stop)
	q := rabbitQueue()
	tlsArgs := []string{"--tls-ca", n.CA, "--tls-cert", n.ClientCert, "--tls-key", n.ClientKey}

	code, out, errOut := cli(t, dialRabbitMQ, append([]string{"topology", "--url", n.AMQPS, "--queue", q, "--apply"}, tlsArgs...)...)
	if code != 0 || !strings.Contains(out, "declared on amqps://") {
		t.Fatalf("topology over TLS: %d\n%s%s", code, out, errOut)
	}
	tr := rabbitTransport(t, n.URL) // the plain port, to seed
	seedDeadLetter(t, tr, q, "m-1", "exhausted 3 attempts: warehouse timeout", time.Now())
	waitDepth(t, tr, q+".dlq", 1)

	code, out, errOut = cli(t, dialRabbitMQ, append([]string{"peek", "--url", n.AMQPS, "--queue", q + ".dlq"}, tlsArgs...)...)
	if code != 0 || !strings.Contains(out, "m-1 ") {
		t.Errorf("peek over TLS: %d\n%s%s", code, out, errOut)
	}
	// status: the management API over https with the client certificate.
	code, out, errOut = cli(t, dialRabbitMQ, append([]string{"status", "--url", n.AMQPS, "--management", n.Management, "--json"}, tlsArgs...)...)
	var got statusOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Source != "management API" || len(got.Services) != 1 || got.Services[0].Queue != q {
		t.Errorf("status over https: %d %v\n%s%s", code, err, out, errOut)
	}

	// No client certificate: refused, and said what it likely means.
	code, _, errOut = cli(t, dialRabbitMQ, "peek", "--url", n.AMQPS, "--queue", q+".dlq", "--tls-ca", n.CA)
	if code != 1 || !strings.Contains(errOut, "the broker may require a client certificate: give --tls-cert and --tls-key") || strings.Contains(errOut, "guest:guest") {
		t.Errorf("without a client certificate: %d\n%s", code, errOut)
	}
	t.Logf("without a client certificate:\n%s", errOut)
	code, _, errOut = cli(t, dialRabbitMQ, "status", "--url", n.AMQPS, "--management", n.Management, "--tls-ca", n.CA)
	if code != 1 || !strings.Contains(errOut, "the broker may require a client certificate") {
		t.Errorf("status without a client certificate: %d\n%s", code, errOut)
	}
	// Another CA: the broker's certificate is not trusted; said.
	code, _, errOut = cli(t, dialRabbitMQ, "peek", "--url", n.AMQPS, "--queue", q+".dlq", "--tls-ca", n.OtherCA, "--tls-cert", n.ClientCert, "--tls-key", n.ClientKey)
	if code != 1 || !strings.Contains(errOut, "--tls-ca") {
		t.Errorf("trusting another CA: %d\n%s", code, errOut)
	}
	// A certificate without its key is a wrong command line.
	if code, _, errOut = cli(t, dialRabbitMQ, "peek", "--url", n.AMQPS, "--queue", q+".dlq", "--tls-cert", n.ClientCert); code != 2 || !strings.Contains(errOut, "go together") {
		t.Errorf("--tls-cert alone: %d\n%s", code, errOut)
	}
	// TLS flags with amqp:// are refused.
	if code, _, errOut = cli(t, dialRabbitMQ, append([]string{"peek", "--url", n.URL, "--queue", q + ".dlq"}, tlsArgs...)...); code != 2 || !strings.Contains(errOut, "amqps://") {
		t.Errorf("TLS flags with amqp://: %d\n%s", code, errOut)
	}

	// The environment instead of the flags.
	t.Setenv(EnvTLSCA, n.CA)
	t.Setenv(EnvTLSCert, n.ClientCert)
	t.Setenv(EnvTLSKey, n.ClientKey)
	t.Setenv(EnvTLSServerName, "localhost")
	code, out, errOut = cli(t, dialRabbitMQ, "peek", "--url", n.AMQPS, "--queue", q+".dlq")
	if code != 0 || !strings.Contains(out, "m-1 ") {
		t.Errorf("peek with $ACEMQ_TLS_*: %d\n%s%s", code, out, errOut)
	}
	// A server name the certificate does not carry.
	code, _, errOut = cli(t, dialRabbitMQ, "peek", "--url", n.AMQPS, "--queue", q+".dlq", "--tls-server-name", "rabbit.example")
	if code != 1 || !strings.Contains(errOut, "--tls-server-name") {
		t.Errorf("another server name: %d\n%s", code, errOut)
	}
}
