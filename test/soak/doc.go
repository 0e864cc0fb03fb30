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
// The tests are in soak_test.go; this file is here so that the package
// has a doc and a non-test file.
package soak
