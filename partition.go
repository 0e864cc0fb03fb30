package acemq

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Partitioned is one logical queue spread over Count queues, Queue.p0 to
// Queue.p{Count-1}: how a queue outgrows the one broker process (and, on a
// cluster, the one node) that serves a RabbitMQ queue. A publisher sends a
// message with key k to For(k); a Server whose Queues entry for Queue sets
// Partitions to Count consumes every partition under the one Mux entry for
// Queue. Each partition is a queue of its own, with its own retry rungs,
// .dlq and .parked: a retry or a dead letter stays in its partition.
//
// The partition of a key is FNV-1a (32 bits) of the key's bytes modulo
// Count (docs/wire-contract.md, "Partitioned queues (v1)"), so every member
// of the family, and any service that computes the same hash, puts a key in
// the same partition. Changing Count moves most keys to another partition:
// see docs/operators.md for what that does to their order.
type Partitioned struct {
	Queue string
	Count int
}

// For returns the partition queue for key: the routing key to publish
// with on the default exchange. It panics if Count is below 1 or Queue is
// empty, a programming error that would otherwise route every message
// nowhere.
func (p Partitioned) For(key string) string {
	p.check()
	return PartitionName(p.Queue, PartitionOf(key, p.Count))
}

// Queues returns the partition queues, in order.
func (p Partitioned) Queues() []string {
	p.check()
	qs := make([]string, p.Count)
	for i := range qs {
		qs[i] = PartitionName(p.Queue, i)
	}
	return qs
}

func (p Partitioned) check() {
	if p.Queue == "" || p.Count < 1 {
		panic(fmt.Sprintf("acemq: Partitioned{Queue: %q, Count: %d}: a partitioned queue needs a name and a count of at least 1", p.Queue, p.Count))
	}
}

// PartitionOf returns the index of key's partition among count: FNV-1a of
// the key's bytes, modulo count. A count below 1 is 0.
func PartitionOf(key string, count int) int {
	if count < 2 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(count))
}

// PartitionName names partition index of queue: queue.p{index}.
func PartitionName(queue string, index int) string {
	return queue + ".p" + strconv.Itoa(index)
}

// Partition says which partition of a partitioned queue a message came
// from; the zero value is a message from a queue that is not partitioned.
type Partition struct {
	Queue string // the logical queue, the name the Mux entry has
	Index int
	Count int
}

// splitPartition reads a partition queue's name back: "orders.p2" is
// partition 2 of "orders". It does not know the count.
func splitPartition(name string) (queue string, index int, ok bool) {
	i := strings.LastIndex(name, ".p")
	if i <= 0 {
		return "", 0, false
	}
	digits := name[i+2:]
	if digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return "", 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || strconv.Itoa(n) != digits {
		return "", 0, false
	}
	return name[:i], n, true
}
