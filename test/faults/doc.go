// Package faults is acemq's fault and bad-input suite: every scenario
// publishes a known set of messages, applies a fault (a broker restarted or
// killed, a consumer killed, connections closed, a blocked connection, a
// refused declaration, queues deleted, a user without configure rights, bad
// input from a raw client, a quorum queue's leader killed in a three-node
// cluster, a .dlq full under reject-publish, a .dlq, .parked and rung
// deleted with nothing else to take what they refuse, a handler that ignores
// its context at the shutdown deadline, messages without an id from a
// foreign client redelivered to an idempotent handler, a dependency down
// behind a queue's breaker while the broker restarts and a consumer is
// killed, routing slips through three stops and two compensations while
// consumers are killed, the node leading a partition of an ordered
// partitioned queue killed under load with its active consumers) and
// accounts for every id: accepted by the handler (and how often), in the
// .dlq, in .parked, still queued. Each scenario prints one line
//
//	FAULT <name>: published=N delivered=N deadlettered=N parked=N lost=N duplicates=N
//
// (a routing slip has more outcomes than a message: slip-kill's line
// counts slips completed, faulted and compensated, half-compensated and
// lost, with the duplicates at-least-once allows; partition-leader-kill
// adds an ORDER line, each key's order of handling against its order of
// publishing, late messages counted by cause) and fails when lost is
// not 0. Run it with ./scripts/test, or
// go test -v ./test/faults/ to see the lines.
//
// Scenarios that stop, kill or block a broker do it to a private node
// (internal/brokertest), never to the shared one.
package faults
