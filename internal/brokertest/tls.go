package brokertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// TLSNode is a private node that requires a client certificate: AMQP over
// TLS (amqps) and the management API over https, both with verify_peer
// and fail_if_no_peer_cert, from a CA made for it. Plain AMQP stays on
// Node.URL, for a test's own setup.
type TLSNode struct {
	*Node
	AMQPS      string // amqps://guest:guest@localhost:PORT/
	Management string // https://localhost:PORT
	// PEM files, in the node's directory: the CA that signed the server's
	// and the client's certificates, and the client's certificate and key.
	CA, ClientCert, ClientKey string
	// OtherCA is a CA that signed nothing of this node's, for a test of a
	// client that trusts the wrong one.
	OtherCA string
}

// StartTLSNode starts a TLSNode on free ports, with certificates made now
// (ECDSA P-256, valid for localhost and 127.0.0.1 for a day), and waits
// until it accepts connections. Stop it with Stop.
func StartTLSNode() (*TLSNode, error) {
	var ports [5]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	port, dist, amqps, mgmt, mgmtPlain := ports[0], ports[1], ports[2], ports[3], ports[4]
	dir, err := os.MkdirTemp("", "acemq-tlsnode-")
	if err != nil {
		return nil, err
	}
	n := &TLSNode{
		Node: &Node{
			Name: RandomName("acemqtls") + "@localhost",
			URL:  fmt.Sprintf("amqp://guest:guest@localhost:%d/", port),
			Port: port,
			dir:  dir,
			lock: make(chan struct{}, 1),
		},
		AMQPS:      fmt.Sprintf("amqps://guest:guest@localhost:%d/", amqps),
		Management: fmt.Sprintf("https://localhost:%d", mgmt),
	}
	fail := func(err error) (*TLSNode, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	files, err := writeCerts(dir)
	if err != nil {
		return fail(err)
	}
	n.CA, n.ClientCert, n.ClientKey, n.OtherCA = files["ca.pem"], files["client.pem"], files["client.key"], files["other-ca.pem"]
	conf := strings.Join([]string{
		fmt.Sprintf("listeners.ssl.default = %d", amqps),
		"ssl_options.cacertfile = " + files["ca.pem"],
		"ssl_options.certfile = " + files["server.pem"],
		"ssl_options.keyfile = " + files["server.key"],
		"ssl_options.verify = verify_peer",
		"ssl_options.fail_if_no_peer_cert = true",
		fmt.Sprintf("management.tcp.port = %d", mgmtPlain),
		fmt.Sprintf("management.ssl.port = %d", mgmt),
		"management.ssl.cacertfile = " + files["ca.pem"],
		"management.ssl.certfile = " + files["server.pem"],
		"management.ssl.keyfile = " + files["server.key"],
		"management.ssl.verify = verify_peer",
		"management.ssl.fail_if_no_peer_cert = true",
		"",
	}, "\n")
	config := filepath.Join(dir, "rabbitmq.conf")
	plugins := filepath.Join(dir, "enabled_plugins")
	if err := os.WriteFile(config, []byte(conf), 0o644); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(plugins, []byte("[rabbitmq_management].\n"), 0o644); err != nil {
		return fail(err)
	}
	if err := chownToRabbitMQ(dir); err != nil {
		return fail(err)
	}
	n.env = append(os.Environ(),
		"RABBITMQ_NODENAME="+n.Name,
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+plugins,
		"RABBITMQ_CONFIG_FILE="+config,
	)
	if err := n.launch(); err != nil {
		n.Stop()
		return nil, err
	}
	watchdog(fmt.Sprintf("rabbitmqctl -q -n %s stop; rm -rf %s", n.Name, dir))
	if err := awaitListener(fmt.Sprintf("localhost:%d", mgmt), time.Minute); err != nil {
		n.Stop()
		return nil, fmt.Errorf("the management API of %s: %w", n.Name, err)
	}
	return n, nil
}

// awaitListener waits until something accepts connections at addr: the
// management plugin starts its listener after the node reports started.
func awaitListener(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func chownToRabbitMQ(dir string) error {
	if out, err := exec.Command("chown", "-R", "rabbitmq:rabbitmq", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chown %s (run as root): %v: %s", dir, err, out)
	}
	return nil
}

// writeCerts makes a CA, a server certificate for localhost and a client
// certificate (CN guest) it signs, and another CA, and writes them to dir
// as PEM; it returns each file's path by name.
func writeCerts(dir string) (map[string]string, error) {
	files := map[string]string{}
	write := func(name, kind string, der []byte) error {
		path := filepath.Join(dir, name)
		files[name] = path
		return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
	}
	ca, caKey, caDER, err := newCert(nil, nil, &x509.Certificate{Subject: pkix.Name{CommonName: "acemq test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	if err != nil {
		return nil, err
	}
	_, _, otherDER, err := newCert(nil, nil, &x509.Certificate{Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
	if err != nil {
		return nil, err
	}
	_, serverKey, serverDER, err := newCert(ca, caKey, &x509.Certificate{Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return nil, err
	}
	_, clientKey, clientDER, err := newCert(ca, caKey, &x509.Certificate{Subject: pkix.Name{CommonName: "guest"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, err
	}
	serverKeyDER, err := x509.MarshalPKCS8PrivateKey(serverKey)
	if err != nil {
		return nil, err
	}
	clientKeyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name, kind string
		der        []byte
	}{
		{"ca.pem", "CERTIFICATE", caDER}, {"other-ca.pem", "CERTIFICATE", otherDER},
		{"server.pem", "CERTIFICATE", serverDER}, {"server.key", "PRIVATE KEY", serverKeyDER},
		{"client.pem", "CERTIFICATE", clientDER}, {"client.key", "PRIVATE KEY", clientKeyDER},
	} {
		if err := write(f.name, f.kind, f.der); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// newCert makes a certificate from template with a new key, signed by
// parent (self-signed when parent is nil).
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, template *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, nil, err
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, der, err
}
