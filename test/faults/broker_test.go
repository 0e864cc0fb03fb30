package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
)

// Scenarios 1, 2 and 4: the broker goes away under load, while a producer
// publishes with confirms and a server consumes with retries in the process
// and on rungs. They take the private node (1, 2) or force-close the
// connections of a vhost of their own (4), and do not run in parallel with
// each other.

const outageMessages = 400

// outage runs the common shape: a producer and a server on url, the fault
// applied once the handler is busy, then settling and accounting.
func outage(t *testing.T, name, url string, fault func()) {
	log := testLogger(t)
	q := "faults." + name
	js := jobs(name, outageMessages)
	l := newLedger()
	pol := testPolicy()
	srvTr := dial(t, url, log)
	pubTr := dial(t, url, log)
	run := serve(t, srvTr, q, &acemq.Server{Retry: pol, PublishTimeout: 5 * time.Second}, l.handler(2*time.Millisecond), log)

	stats := &publishStats{}
	published := make(chan []job, 1)
	go func() { published <- publishAll(t, pubTr, q, js, 4, 40*time.Millisecond, stats) }()
	polltest.Within(t, 30*time.Second, "the handler is busy", func() bool { return l.totalCalls() >= outageMessages/8 })
	fault()
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	if !polltest.Until(60*time.Second, sk.settled(l, sent)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	sk.collect(t, name, sent, l.acceptedCopy(), pol).report(t)
}

// TestFaultBrokerRestart is scenario 1: rabbitmqctl stop_app, a pause,
// start_app, in the middle of the load.
func TestFaultBrokerRestart(t *testing.T) {
	n := node.Get(t)
	n.Acquire(t)
	url, _ := n.FreshVhost(t)
	outage(t, "broker-restart", url, func() {
		n.StopApp(t)
		time.Sleep(time.Second)
		n.StartApp(t)
	})
}

// TestFaultBrokerKilled is scenario 2: the node's VM is killed with SIGKILL
// and started again on the same data.
func TestFaultBrokerKilled(t *testing.T) {
	n := node.Get(t)
	n.Acquire(t)
	url, _ := n.FreshVhost(t)
	outage(t, "broker-kill9", url, func() {
		n.Kill(t)
		time.Sleep(500 * time.Millisecond)
		n.Restart(t)
	})
}

// TestFaultConnectionsClosed is scenario 4: every connection of the vhost
// closed by force, five times, 700ms apart.
func TestFaultConnectionsClosed(t *testing.T) {
	t.Parallel()
	url, vh := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	outage(t, "connections-closed", url, func() {
		for i := range 5 {
			brokertest.Ctl(t, "", "close_all_connections", "-p", vh, fmt.Sprintf("acemq faults: forced close %d", i+1))
			time.Sleep(700 * time.Millisecond)
		}
	})
}
