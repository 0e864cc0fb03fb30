// Package soak holds the compressed soak (issue 29): a seeded random
// schedule of traffic and faults run against acemq.Server and
// acemq.Publisher on the memory transport's virtual clock, so that hours
// or a week of a service's life pass in seconds or minutes, with every
// message id accounted for at the end (handled, .dlq, .parked, held,
// destroyed by a queue's deletion, lost, duplicates) and the seed printed
// so that a failing schedule replays.
//
//	go test -race ./test/soak/                                  # the CI schedule
//	go test ./test/soak/ -soak.duration=168h -soak.seed=42 -v   # a simulated week
//
// TestSoakRabbitMQ (rabbitmq_test.go) replays the same seed's schedule
// against RabbitMQ, on a private node: its first -soak.rabbitmq-duration
// (6 simulated hours) with every wait divided by -soak.rabbitmq-scale
// (300), about a minute and a half. It does for real the faults a broker
// can be made to take (every connection closed, a work queue deleted, the
// memory alarm, process restarts; the handlers as on the memory
// transport), draws and leaves out the others (nacks, lost confirms,
// dropped publishes, a cancel that keeps the queue: no RabbitMQ operation
// makes them happen to order), names them in its SOAK line, and holds the
// run to the same ledger: lost=0.
//
//	flock -o /tmp/acemq-broker.lock ./scripts/test -count=1 -run TestSoakRabbitMQ ./test/soak/ -args -soak.seed=42
//
// The tests are in soak_test.go; this file is here so that the package
// has a doc and a non-test file.
package soak
