package rabbitmq

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
)

// private is a broker node of the tests' own, started on first use, for
// the tests that stop, block or kill a broker: no other package's tests
// running at the same time lose their broker. TestMain stops it.
var private brokertest.Lazy

func privateNode(tb testing.TB) *brokertest.Node {
	tb.Helper()
	brokerURL(tb) // the same gating as every integration test
	return private.Get(tb)
}

func stopPrivateNode() { private.Stop() }

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
