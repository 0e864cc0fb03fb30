// Package wire is the wire contract of docs/wire-contract.md written once:
// the headers every AceMQ library reads, how a new message is stamped, how
// a copy of a delivery is built, and how a delivery is read back. Every
// publisher of this module (the Publisher, the server's retries, rungs,
// dead letters and parks, Replay, the outbox relay) goes through it, so
// that what goes on the wire cannot differ from one of them to the next,
// and the tests that hold it to the document hold all of them.
package wire
