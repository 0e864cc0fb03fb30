package brokertest

import (
	"syscall"
	"testing"
)

// Freeze stops the node's Erlang VM with SIGSTOP: its sockets stay open
// and take what clients send, and nothing answers, as a node that is cut
// off, swapping, or stuck in a long pause looks to a client. Thaw (or the
// test's end) lets it go on.
func (n *Node) Freeze(tb testing.TB) {
	tb.Helper()
	pid, err := n.pid()
	if err != nil {
		tb.Fatalf("find the pid of %s: %v", n.Name, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		tb.Fatalf("kill -STOP %d: %v", pid, err)
	}
	n.frozen = pid
	tb.Cleanup(func() { n.Thaw(tb) })
}

// Thaw lets a frozen node's VM go on (SIGCONT); a node not frozen is left
// as it is.
func (n *Node) Thaw(tb testing.TB) {
	tb.Helper()
	if n.frozen == 0 {
		return
	}
	if err := syscall.Kill(n.frozen, syscall.SIGCONT); err != nil {
		tb.Errorf("kill -CONT %d: %v", n.frozen, err)
	}
	n.frozen = 0
}
