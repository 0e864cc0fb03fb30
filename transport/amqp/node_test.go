package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A private broker node, started once for the tests that stop a broker
// (stop_app) so that no other package's tests running at the same time lose
// their broker. It listens on free ports and keeps its data in a
// temporary directory; TestMain stops it.
var private struct {
	once sync.Once
	node *brokerNode
	err  error
}

type brokerNode struct {
	name string
	url  string
	dir  string
}

func privateNode(tb testing.TB) *brokerNode {
	tb.Helper()
	brokerURL(tb) // the same gating as every integration test
	private.once.Do(func() { private.node, private.err = startNode() })
	if private.err != nil {
		tb.Fatalf("start a private broker node: %v", private.err)
	}
	return private.node
}

func stopPrivateNode() {
	if n := private.node; n != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = exec.CommandContext(ctx, "rabbitmqctl", "-n", n.name, "stop").Run()
		_ = os.RemoveAll(n.dir)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startNode() (*brokerNode, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dist, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "acemq-node-")
	if err != nil {
		return nil, err
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	n := &brokerNode{
		name: "acemqtest" + hex.EncodeToString(b) + "@localhost",
		url:  fmt.Sprintf("amqp://guest:guest@localhost:%d/", port),
		dir:  dir,
	}
	plugins := filepath.Join(dir, "enabled_plugins")
	if err := os.WriteFile(plugins, []byte("[].\n"), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command("chown", "-R", "rabbitmq:rabbitmq", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("chown %s (run as root): %v: %s", dir, err, out)
	}
	cmd := exec.Command("rabbitmq-server", "-detached")
	cmd.Env = append(os.Environ(),
		"RABBITMQ_NODENAME="+n.name,
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+plugins,
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("rabbitmq-server: %v: %s", err, out)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := exec.Command("rabbitmqctl", "-n", n.name, "await_startup", "--timeout", "10").CombinedOutput()
		if err == nil {
			return n, nil
		}
		if time.Now().After(deadline) {
			private.node = n // so that TestMain still stops it
			return nil, fmt.Errorf("node %s did not start: %v: %s", n.name, err, out)
		}
		time.Sleep(time.Second)
	}
}

// freshVhost creates a virtual host on the main broker for one test and
// deletes it at the end; it returns the URL for it.
func freshVhost(tb testing.TB) (string, string) {
	tb.Helper()
	u, err := url.Parse(brokerURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	vh := "acemqtest-" + hex.EncodeToString(b)
	rabbitmqctl(tb, "", "add_vhost", vh)
	user := u.User.Username()
	rabbitmqctl(tb, "", "set_permissions", "-p", vh, user, ".*", ".*", ".*")
	tb.Cleanup(func() { rabbitmqctl(tb, "", "delete_vhost", vh) })
	u.Path = "/" + vh
	u.RawPath = ""
	return u.String(), vh
}
