// Package delay is acemq's delay infrastructure: any delay up to about 388
// days on a fixed set of 28 quorum queues, walked by the broker's
// dead-lettering, with no consumer on the way and no message waiting
// behind another with a different delay.
//
// # The layout (v1)
//
// Level k (0..27) is a topic exchange and a quorum queue, both named
// acemq.delay.v1.NN, whose messages wait 2^k × 125 ms and are then
// dead-lettered (at least once) to the exchange of level k−1, level 0's to
// acemq.delay.v1.deliver. A message's routing key spells its delay in 28
// bit-words, most significant first, then its destination queue:
// "b27.….b0.<queue>". Exchange k sends a message whose bit k is 1 to its
// queue, and one whose bit k is 0 straight on to the next exchange down,
// so a message waits exactly on the levels of its set bits. The deliver
// exchange routes by the destination's words to the queue, bound with
// [Bind]; a message no queue is bound for goes to its alternate exchange,
// acemq.delay.v1.undeliverable, and waits in the queue of that name until
// [Redeliver] moves it again. docs/wire-contract.md ("Delays (v1)") is the
// contract another client implements.
//
// A delay is rounded up to the unit of 125 ms, never down: a message is
// never early, and late by less than one unit plus the broker's latency.
package delay
