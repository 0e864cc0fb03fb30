package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/acemq/acemq/internal/brokertest"
)

// TestMain checks that no goroutine the example started (its server, the
// transport's) outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPartitions runs the example on the memory transport and, when a
// broker is given, on RabbitMQ (in a vhost of its own, deleted after):
// every account's events applied in order, from the partition the hash
// names, and the output is the README's.
func TestPartitions(t *testing.T) {
	brokertest.OnEachBroker(t, func(t *testing.T, url string) {
		if url != "" {
			url, _ = brokertest.FreshVhost(t, "", url)
		}
		var out bytes.Buffer
		if err := run(&out, url); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		if strings.Contains(out.String(), "OUT OF ORDER") {
			t.Errorf("events applied out of order:\n%s", out.String())
		}
		if want := readmeOutput(t); out.String() != want {
			t.Errorf("the output is not the README's.\ngot:\n%s\nREADME:\n%s", out.String(), want)
		}
	})
}

func readmeOutput(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```text\n")
	if !ok {
		t.Fatal("README.md has no ```text block")
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("README.md's ```text block does not end")
	}
	return block
}
