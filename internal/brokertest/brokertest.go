// Package brokertest runs RabbitMQ for tests that hurt it: a private node on
// free ports, with its data in a temporary directory, that a test may stop,
// kill or block without disturbing the broker every other package's tests
// share. It also gates integration tests on ACEMQ_AMQP_URL the way the rest
// of the repository does, and makes throwaway vhosts and users on the shared
// broker.
//
// It shells out to rabbitmq-server and rabbitmqctl and must run as root (the
// node's directory is handed to the rabbitmq user).
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SharedURL is ACEMQ_AMQP_URL, the shared broker's vhost for this run.
// Without it the test is skipped, unless CI is set: under CI nothing may
// skip.
func SharedURL(tb testing.TB) string {
	tb.Helper()
	return Env(tb, "ACEMQ_AMQP_URL")
}

// PostgresURL is ACEMQ_POSTGRES_URL, the run's throwaway database, gated
// like SharedURL: skipped without it unless CI is set.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	return Env(tb, "ACEMQ_POSTGRES_URL")
}

// Env reads an integration test's environment variable (a URL, a vhost):
// without it the test is skipped, unless CI is set, where nothing may skip.
// Every integration test gates through it.
func Env(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("CI is set but %s is not: integration tests may not skip (run ./scripts/test)", name)
		}
		tb.Skipf("%s is not set", name)
	}
	return v
}

// Optional reads the environment variable of a service a test can run
// without (a test on the memory transport always, on RabbitMQ as well when
// it is given): "" when it is unset and CI is unset; under CI, where
// nothing may be left out, a missing one fails the test.
func Optional(tb testing.TB, name string) string {
	tb.Helper()
	if os.Getenv(name) == "" && os.Getenv("CI") == "" {
		return ""
	}
	return Env(tb, name)
}

// OnEachBroker runs f as a subtest on the memory transport (url "") and
// then, when ACEMQ_AMQP_URL is given, as another on RabbitMQ (url that),
// one after the other: for a test of a program that takes "" for the
// memory transport, as the examples do. Under CI the RabbitMQ run may not
// be left out (Optional).
func OnEachBroker(t *testing.T, f func(t *testing.T, url string)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) { f(t, "") })
	if url := Optional(t, "ACEMQ_AMQP_URL"); url != "" {
		t.Run("rabbitmq", func(t *testing.T) { f(t, url) })
	}
}

// SharedNode is the shared broker's node name: RABBITMQ_NODENAME, else
// rabbit@localhost.
func SharedNode() string {
	if n := os.Getenv("RABBITMQ_NODENAME"); n != "" {
		return n
	}
	return "rabbit@localhost"
}

// Ctl runs rabbitmqctl against node ("" is the shared node) and returns its
// output, failing the test when it fails.
func Ctl(tb testing.TB, node string, args ...string) string {
	tb.Helper()
	out, err := ctl(node, 90*time.Second, args...)
	if err != nil {
		tb.Fatalf("rabbitmqctl -n %s %s: %v", nodeOrShared(node), strings.Join(args, " "), err)
	}
	return out
}

// bounded makes cmd end with its context, children and all: rabbitmqctl
// runs su, sh and an Erlang VM, and killing rabbitmqctl alone leaves them
// holding its output open, so the call never returned (a start_app that
// hung, seen in the netsplit scenarios). Its process group is killed, and
// the wait for its output ends a second later whatever holds it (then, if
// it had succeeded, exec.ErrWaitDelay: a success).
func bounded(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	return cmd
}

func nodeOrShared(node string) string {
	if node == "" {
		return SharedNode()
	}
	return node
}

func ctl(node string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := bounded(exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-q", "-n", nodeOrShared(node)}, args...)...)).CombinedOutput()
	if errors.Is(err, exec.ErrWaitDelay) { // it succeeded; a child it left holds the output
		err = nil
	}
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// RandomName returns prefix followed by eight random hex digits.
func RandomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// FreshVhost creates a vhost on the node behind baseURL (node "" is the
// shared one), grants baseURL's user everything on it, deletes it when the
// test ends, and returns baseURL pointed at it, and its name. Under
// scripts/test the name starts with the run's ACEMQ_TEST_RUN, so that the
// script removes it even when the test binary was killed before its
// cleanup, and two runs on one broker never touch each other's.
func FreshVhost(tb testing.TB, node, baseURL string) (string, string) {
	tb.Helper()
	u, err := url.Parse(baseURL)
	if err != nil {
		tb.Fatal(err)
	}
	prefix := "acemqfault-"
	if run := os.Getenv("ACEMQ_TEST_RUN"); run != "" {
		prefix = run + "-fault-"
	}
	vh := RandomName(prefix)
	Ctl(tb, node, "add_vhost", vh)
	tb.Cleanup(func() {
		if _, err := ctl(node, 90*time.Second, "delete_vhost", vh); err != nil {
			tb.Logf("delete vhost %s: %v", vh, err)
		}
	})
	Ctl(tb, node, "set_permissions", "-p", vh, u.User.Username(), ".*", ".*", ".*")
	return WithVhost(baseURL, vh), vh
}

// WithVhost returns rawURL pointed at vhost.
func WithVhost(rawURL, vhost string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.Path = "/" + vhost
	u.RawPath = "/" + url.PathEscape(vhost)
	return u.String()
}

// WithUser returns rawURL with other credentials.
func WithUser(rawURL, user, password string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// AddUser creates a user on node with the given permissions on vhost
// (configure, write and read regular expressions; "^$" grants nothing) and
// deletes it when the test ends. It returns the password.
func AddUser(tb testing.TB, node, vhost, user, configure, write, read string) string {
	tb.Helper()
	password := RandomName("pw")
	Ctl(tb, node, "add_user", user, password)
	tb.Cleanup(func() {
		if _, err := ctl(node, 90*time.Second, "delete_user", user); err != nil {
			tb.Logf("delete user %s: %v", user, err)
		}
	})
	Ctl(tb, node, "set_permissions", "-p", vhost, user, configure, write, read)
	return password
}

// Node is a private RabbitMQ node. Its methods that change the node's state
// are for one test at a time: hold Acquire while using them.
type Node struct {
	Name string // rabbitmqctl's -n
	URL  string // amqp://guest:guest@localhost:PORT/
	Port int

	dir    string
	env    []string
	lock   chan struct{}
	frozen int // the pid Freeze stopped, until Thaw (freeze.go)
}

// StartNode starts a private node on free ports with its data in a new
// temporary directory and waits until it accepts connections. Stop it with
// Stop; nothing else will.
func StartNode() (*Node, error) { return startNode(nil) }

// startNode is StartNode with setup, when not nil, run on the node's new
// directory before the node starts: it writes what files it needs there
// and returns more environment for rabbitmq-server (netsplit.go).
func startNode(setup func(dir string) ([]string, error)) (*Node, error) {
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
	n := &Node{
		Name: RandomName("acemqfault") + "@localhost",
		URL:  fmt.Sprintf("amqp://guest:guest@localhost:%d/", port),
		Port: port,
		dir:  dir,
		lock: make(chan struct{}, 1),
	}
	plugins := filepath.Join(dir, "enabled_plugins")
	if err := os.WriteFile(plugins, []byte("[].\n"), 0o644); err != nil {
		return nil, err
	}
	var extra []string
	if setup != nil {
		if extra, err = setup(dir); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command("chown", "-R", "rabbitmq:rabbitmq", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("chown %s (run as root): %v: %s", dir, err, out)
	}
	n.env = append(os.Environ(),
		"RABBITMQ_NODENAME="+n.Name,
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+plugins,
	)
	n.env = append(n.env, extra...)
	if err := n.launch(); err != nil {
		n.Stop()
		return nil, err
	}
	watchdog(fmt.Sprintf("rabbitmqctl -q -n %s stop; rm -rf %s", n.Name, dir))
	return n, nil
}

// watchdog runs script, in a session of its own, once this process has
// ended: a test binary killed by its timeout runs no cleanup, and a node
// left behind would outlive every later run.
func watchdog(script string) {
	cmd := exec.Command("sh", "-c", fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 2; done; %s", os.Getpid(), script))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		_ = cmd.Process.Release() // it outlives us; nobody waits for it
	}
}

// launch runs rabbitmq-server -detached with the node's settings and waits
// for the node to finish booting.
func (n *Node) launch() error {
	cmd := exec.Command("rabbitmq-server", "-detached")
	cmd.Env = n.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmq-server: %v: %s", err, out)
	}
	return n.awaitStartup(2 * time.Minute)
}

func (n *Node) awaitStartup(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		_, err := ctl(n.Name, 30*time.Second, "await_startup", "--timeout", "10")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s did not start: %w", n.Name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Stop stops the node and removes its directory. It is for TestMain.
func (n *Node) Stop() {
	if n == nil {
		return
	}
	if _, err := ctl(n.Name, time.Minute, "stop"); err != nil {
		if pid, err := n.pid(); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(n.dir)
}

// Acquire gives the test the node to itself until it ends, and puts the node
// back in order then: application running, memory alarm cleared.
func (n *Node) Acquire(tb testing.TB) {
	tb.Helper()
	n.lock <- struct{}{}
	tb.Cleanup(func() {
		defer func() { <-n.lock }()
		if _, err := ctl(n.Name, 10*time.Second, "await_startup", "--timeout", "5"); err != nil {
			if _, err := ctl(n.Name, 10*time.Second, "status"); err != nil {
				_ = n.launch() // killed and not restarted
			} else {
				_, _ = ctl(n.Name, time.Minute, "start_app")
			}
		}
		_, _ = ctl(n.Name, time.Minute, "set_vm_memory_high_watermark", "0.4")
	})
}

// Ctl runs rabbitmqctl against the node.
func (n *Node) Ctl(tb testing.TB, args ...string) string {
	tb.Helper()
	return Ctl(tb, n.Name, args...)
}

// FreshVhost is FreshVhost on the node.
func (n *Node) FreshVhost(tb testing.TB) (string, string) {
	tb.Helper()
	return FreshVhost(tb, n.Name, n.URL)
}

// StopApp stops the RabbitMQ application (rabbitmqctl stop_app); the Erlang
// node stays up.
func (n *Node) StopApp(tb testing.TB) {
	tb.Helper()
	n.Ctl(tb, "stop_app")
}

// StartApp starts the application again and waits until it accepts
// connections.
func (n *Node) StartApp(tb testing.TB) {
	tb.Helper()
	n.Ctl(tb, "start_app")
	if err := n.awaitStartup(time.Minute); err != nil {
		tb.Fatal(err)
	}
}

// Kill kills the node's Erlang VM with SIGKILL, as a crash or the OOM killer
// would, and waits until it is gone.
func (n *Node) Kill(tb testing.TB) {
	tb.Helper()
	pid, err := n.pid()
	if err != nil {
		tb.Fatalf("find the pid of %s: %v", n.Name, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		tb.Fatalf("kill -9 %d: %v", pid, err)
	}
	for start := time.Now(); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			tb.Fatalf("process %d survived SIGKILL", pid)
		}
	}
}

// Restart starts a node that was killed, on the same ports and data.
func (n *Node) Restart(tb testing.TB) {
	tb.Helper()
	if err := n.launch(); err != nil {
		tb.Fatal(err)
	}
}

// pid asks the node for the OS pid of its VM.
func (n *Node) pid() (int, error) {
	out, err := ctl(n.Name, 30*time.Second, "eval", "os:getpid().")
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.Trim(strings.TrimSpace(out), `"`))
	if err != nil {
		return 0, fmt.Errorf("pid %q: %w", out, err)
	}
	if pid <= 1 {
		return 0, errors.New("no pid")
	}
	return pid, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Lazy starts one private node the first time Get is called and keeps it for
// every later caller; TestMain calls Stop.
type Lazy struct {
	once sync.Once
	node *Node
	err  error
}

// Get returns the node, starting it on first use; it fails tb when the node
// cannot start. It gates on SharedURL first, so a run without a broker
// skips (or fails under CI) the same way as every integration test.
func (l *Lazy) Get(tb testing.TB) *Node {
	tb.Helper()
	SharedURL(tb)
	l.once.Do(func() { l.node, l.err = StartNode() })
	if l.err != nil {
		tb.Fatalf("start a private RabbitMQ node: %v", l.err)
	}
	return l.node
}

// Stop stops the node if it was started.
func (l *Lazy) Stop() {
	if l.node != nil {
		l.node.Stop()
	}
}

// StartCluster starts n private nodes and joins the others to the first,
// as a cluster on this machine. Stop each node with Stop.
func StartCluster(n int) ([]*Node, error) { return startCluster(n, nil) }

// startCluster is StartCluster with setup, when not nil, given to node i's
// startNode as setup(i, dir).
func startCluster(n int, setup func(i int, dir string) ([]string, error)) ([]*Node, error) {
	nodes := make([]*Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range nodes {
		var each func(string) ([]string, error)
		if setup != nil {
			each = func(dir string) ([]string, error) { return setup(i, dir) }
		}
		wg.Go(func() { nodes[i], errs[i] = startNode(each) })
	}
	wg.Wait()
	stopAll := func() {
		for _, nd := range nodes {
			nd.Stop()
		}
	}
	if err := errors.Join(errs...); err != nil {
		stopAll()
		return nil, err
	}
	for _, nd := range nodes[1:] {
		for _, args := range [][]string{{"stop_app"}, {"join_cluster", nodes[0].Name}, {"start_app"}} {
			if _, err := ctl(nd.Name, 2*time.Minute, args...); err != nil {
				stopAll()
				return nil, fmt.Errorf("join %s to %s: %w", nd.Name, nodes[0].Name, err)
			}
		}
		if err := nd.awaitStartup(time.Minute); err != nil {
			stopAll()
			return nil, err
		}
	}
	return nodes, nil
}
