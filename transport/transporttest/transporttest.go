// Package transporttest is the conformance suite every
// [transport.Transport] passes: the memory transport in its tests, the
// amqp transport against a real RabbitMQ. Where the two disagree, the
// suite settles it the way RabbitMQ 3.10 behaves.
//
// # Running it
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, transporttest.Harness{
//			New:     func(tb testing.TB) transport.Transport { ... },
//			Advance: func(tb testing.TB, d time.Duration) { ... },
//		})
//	}
//
// Every case is a parallel subtest with names of its own (a random prefix
// per Run), so runs can share one vhost. TTLs are a few hundred
// milliseconds and every receive gives up after a few seconds, so a real
// broker finishes the suite in seconds and a failure never hangs.
package transporttest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// Harness connects the suite to one transport implementation.
type Harness struct {
	// New returns a transport on a clean broker (or namespace); the suite
	// closes it. Called possibly several times per test (e.g. two
	// connections): calls with the same tb must reach the same broker.
	// Subtests run in parallel, so New must be safe for concurrent use.
	New func(tb testing.TB) transport.Transport
	// Advance lets d pass: the memory transport moves its virtual clock; a
	// real broker sleeps. It is called with the tb New was called with.
	Advance func(tb testing.TB, d time.Duration)
	// Stallable, when set, returns a transport on a broker the test may
	// stall (stall.go), for the case of it alone: a private node, say.
	// Without it the case skips, except under CI.
	Stallable func(tb testing.TB) Stallable
}

// Timeouts of the suite, in real time.
const (
	// wait bounds every receive and every wait for a queue to reach a
	// state. It only detects a failure, so it is generous: a busy machine
	// (two runs of the suite, both cores loaded) takes seconds where an
	// idle one takes milliseconds, and a passing case never waits it out.
	wait = 30 * time.Second
	// quiet is how long a receive waits to conclude nothing more comes.
	quiet = 250 * time.Millisecond
	// ttl is the message TTL of the suite's expiry cases.
	ttl = 300 * time.Millisecond
)

type testCase struct {
	name string
	run  func(t *testing.T, e *env)
}

// cases lists every conformance test.
var cases = []testCase{
	// publish.go
	{"PublishConsumeAck", testPublishConsumeAck},
	{"EmptyBodyNoHeaders", testEmptyBodyNoHeaders},
	{"HeadersAreCopies", testHeadersAreCopies},
	{"Mandatory", testMandatory},
	{"PublishToMissingExchange", testPublishToMissingExchange},
	{"Fanout", testFanout},
	// settle.go
	{"RejectRequeue", testRejectRequeue},
	{"SettleTwice", testSettleTwice},
	{"Get", testGet},
	{"RequeueRestoresOrder", testRequeueRestoresOrder},
	{"QuorumReturnOrder", testQuorumReturnOrder},
	// flow.go
	{"Prefetch", testPrefetch},
	{"SubscriptionCloseReturnsUnacked", testSubscriptionCloseReturns},
	{"CancelClosesDeliveries", testCancel},
	{"TransportCloseReturnsUnacked", testTransportCloseReturns},
	{"CompetingConsumers", testCompetingConsumers},
	// cancel.go
	{"QueueDeletedCancelsConsumer", testQueueDeleted},
	{"ErrNilWhenAsked", testErrNilWhenAsked},
	// deadletter.go
	{"RejectDeadLetters", testRejectDeadLetters},
	{"TTLExpiresThroughDeadLetterExchange", testTTLRung},
	{"QuorumDeliveryLimitDeadLetters", testQuorumDeliveryLimit},
	{"QuorumDeliveryLimitDrops", testQuorumDeliveryLimitDrops},
	{"XDeathCountsPerQueueAndReason", testXDeathCounts},
	{"DeadLetterCycleDropped", testDeadLetterCycleDropped},
	// limits.go
	{"RejectPublishPastMaxLength", testRejectPublish},
	{"RejectPublishMaxLengthZero", testRejectPublishZero},
	{"RejectPublishOneOfSeveral", testRejectPublishOneOfSeveral},
	{"RejectPublishMaxLengthBytes", testRejectPublishBytes},
	{"RejectPublishDeadLetters", testRejectPublishDLX},
	{"DropHeadDeadLettersOldest", testDropHead},
	{"DropHeadDropsGivenBack", testDropHeadGivenBack},
	{"QuorumRejectPublish", testQuorumRejectPublish},
	{"LimitArgsRefused", testLimitArgsRefused},
	// amqplimits.go
	{"MessageIDLimit", testMessageIDLimit},
	{"ShortStringProperties", testShortStringProperties},
	{"HeaderNameLimit", testHeaderNameLimit},
	{"HeaderDepthLimit", testHeaderDepthLimit},
	{"HeaderEntriesLimit", testHeaderEntriesLimit},
	{"HeadersOverFrame", testHeadersOverFrame},
	// declare.go
	{"InequivalentRedeclare", testInequivalentRedeclare},
	{"DeclareStopsAtFirstRefusal", testDeclareStops},
	{"InequivalentExchange", testInequivalentExchange},
	{"BindMissing", testBindMissing},
	{"Inspect", testInspect},
	{"ConsumeMissingQueue", testConsumeMissing},
	{"Closed", testClosed},
	// exclusive.go
	{"ExclusiveQueue", testExclusiveQueue},
	// delay.go
	{"DelayWalk", testDelayWalk},
	{"DelayUndeliverable", testDelayUndeliverable},
	// stall.go
	{"StallHoldsBack", testStallHoldsBack},
}

// Run runs every conformance test as subtests of t.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Advance == nil {
		t.Fatal("transporttest: Harness needs both New and Advance")
	}
	id := runID()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &env{t: t, h: h, prefix: "acemq-tt." + id + "." + c.name})
		})
	}
}

func runID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
