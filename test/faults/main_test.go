package faults_test

import (
	"os"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
)

// node is the private RabbitMQ node of the scenarios that stop, kill or
// block a broker; it starts on first use.
var node brokertest.Lazy

func TestMain(m *testing.M) {
	code := m.Run()
	node.Stop()
	pg.Stop()
	os.Exit(code)
}
