// Package acemqtest tests acemq handlers and servers in-process, as
// net/http/httptest does for HTTP handlers and rivertest for River
// workers: the real server on the memory transport, a virtual clock that
// a test runs instead of sleeping, and the server's own settlement
// decision for one message at a time.
//
//	ts := acemqtest.NewServer(t, mux, &acemq.Server{Retry: policy})
//	ts.Publish(t, "orders", Order{ID: 7})
//	ts.RunUntilIdle(t) // every retry spent, jitter and all, in milliseconds
//	dead := ts.DeadLetters("orders")
//
// # Two ways to test
//
// [NewServer] runs an acemq.Server, with the settings the test gave it, on
// a memory broker of its own, returns once every queue is subscribed and
// shuts the server down when the test ends. The test publishes
// ([Server.Publish]), runs the clock ([Server.RunUntilIdle],
// [Server.Advance], [Server.Await]) and looks at where the messages ended
// ([Server.Queue], [Server.DeadLetters], [Server.Parked]).
//
// [Serve] needs no broker: it runs a server's handler on one message and
// returns the handler's answer and the server's verdict on it
// (acemq.Server.Decide), on the test's goroutine. It suits a table of
// attempts and answers; NewServer suits what only a running server shows:
// the copies on the wire, rungs, delay queues, a broker that refuses.
//
// # Time
//
// The server tells time by the broker's virtual clock, which stands still
// until the test moves it, so a five-minute ladder takes milliseconds and
// no test sleeps. Two states say when to move it:
//
//   - The server is quiet when it is ready (acemq.Server.CheckReady: every
//     queue consumed) and every message delivered to it and not yet
//     settled is asleep on the virtual clock: as many unsettled
//     deliveries on its queues as After channels pending on the clock (a
//     retry held in the process is one of each; so is a handler waiting on
//     the clock). A handler at work, a copy being published, a copy the
//     broker refused being published again are not quiet.
//   - The server is idle when it is quiet and the clock has no timer
//     pending (memory.Clock.Next): no wait in the process, no message on a
//     rung, the delay queues or anywhere else with a TTL. Moving the clock
//     would change nothing.
//
// RunUntilIdle, Advance and Await wait for quiet, move the clock to the
// next timer and wait for quiet again, so each wait fires at its own
// deadline and whatever it sets off happens before the next. Waiting for
// quiet is the package's one real-time wait: the broker announces no
// settle, so it asks the broker at most every millisecond, for up to ten
// seconds, and fails the test with what was still busy.
//
// Idle leaves out what the server does on the wall clock: a copy the
// broker nacked or blocked is published again with real backoff (its
// delivery stays unsettled, so quiet waits for it: about 2.5 s for a nack
// that does not clear), a consumer the broker cancelled is consumed again
// with real backoff (not ready, so not quiet), and due messages whose
// queue was missing are sent round every acemq.RedeliverEvery (10 s) from
// acemq.delay.v1.undeliverable: idle does not wait for those. Quiet also
// assumes that every After pending on the broker's clock belongs to an
// unsettled delivery: another goroutine asleep on it would be counted as
// the server's, and a handler still asleep on it after the broker took its
// delivery back (memory.WithConsumerTimeout) is one too many, so the
// server is not quiet until the wait fails the test.
//
// # Faults and limits
//
// No mocks: the broker itself misbehaves. Server.Broker.SetPublishFault
// with memory.FaultNext or memory.FaultEvery nacks, blocks, loses the
// confirm of, or drops the publishes to one queue; [WithBroker] with
// memory.WithConsumerTimeout takes back a delivery left unsettled too
// long; acemq.QueueConfig.Args declare x-max-length and x-overflow; a
// header table over memory.FrameMax is refused as RabbitMQ's would be;
// Broker.DeleteQueue and Broker.Unbind break the topology under the
// server.
package acemqtest
