// Package outbox is a transactional outbox on PostgreSQL: a service writes
// its business change and the message it owes in one transaction, and a
// relay publishes the message once that transaction has committed. Nothing
// is published for a transaction that rolled back, and nothing that
// committed is lost: a row leaves the table only after the broker
// confirmed its message and a queue took it.
//
//	ob, err := outbox.New(pool)                  // pool is a *pgxpool.Pool
//	_, err = pool.Exec(ctx, ob.CreateTableSQL()) // in a migration
//
//	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, "INSERT INTO orders ...", ...); err != nil {
//			return err
//		}
//		_, err := ob.Write(ctx, tx, outbox.Message{Exchange: "orders", RoutingKey: "order.placed", Body: body})
//		return err
//	})
//
//	relay, err := outbox.NewRelay(ob, t) // t is a transport.Transport
//	err = relay.Run(ctx)                 // until ctx ends
//
// # The table
//
// [Outbox.CreateTableSQL] creates the table (acemq_outbox unless
// [WithTable] names another), an index on the time each row is next due,
// and a statement trigger that NOTIFYs the relays of an insert when none
// of them is awake. A NOTIFY is delivered when its transaction commits,
// and only then, so a sleeping relay wakes exactly when there is something
// it may publish. A relay that is working says so with an advisory lock
// the trigger tests, and claims again instead of waiting for notifications;
// it goes back to sleep only when no writer's transaction that inserted is
// open, after one last claim, so that no row waits for the poll interval.
// That spares the writers PostgreSQL's notification commit lock, which
// serialises every notifying transaction in the server: under a load of
// one-row transactions, about 1.7 times the throughput (bench/README.md,
// "Relay"). Trigger and relay each still work with the other's older
// version. Rows are ordered
// by an identity column, seq: the write order, meaning the order of the
// inserts. It is exact within a transaction and between transactions that
// follow each other; of two transactions that overlap, the one that
// inserted first may commit last, and its rows then go out after the
// other's.
//
// Each row carries its message's x-acemq-id, given or generated at write
// time. A relay that publishes a row twice (see "Duplicates") publishes the
// same id twice, and an idempotent consumer drops the second.
//
// # Relaying
//
// A relay claims up to a batch of due rows in write order with SELECT ...
// FOR UPDATE SKIP LOCKED, publishes each through the transport with
// confirms, mandatory and persistent, and, in the same transaction, deletes
// the rows whose messages were confirmed and routed. Any number of relays,
// in one process or many, may share a table: a row is held by one claiming
// transaction at a time, and the others skip it.
//
// Every message carries the wire contract's headers: x-acemq-id (also the
// AMQP message-id), x-acemq-attempt 1, x-acemq-created (the row's
// created_at, the writing transaction's start, in Unix milliseconds), and
// x-acemq-exchange and x-acemq-routing-key.
//
// A relay wakes on the table's notifications, on a connection it takes
// out of the pool for good (the pool may open another in its place), and
// looks for due rows every poll interval ([WithPollInterval]) besides:
// that is what finds a retry that came due, and rows whose notification
// was missed while the listening connection was down.
//
// # What is kept
//
// The relay's duty is the one every AceMQ library keeps: when the copy
// reaches no queue, keep the original. A message that was unroutable (the
// broker confirmed it but no queue took it), nacked, not confirmed in time,
// or refused (its exchange does not exist) stays in the table: its
// attempts column counts the failure, last_error says what happened, and
// next_attempt_at puts it off by a backoff that doubles per failure up to
// a cap ([WithBackoff]). It is never dropped: once its queue or exchange
// exists, it goes out. Watch the pending and oldest-age metrics, and
// last_error, for rows that never will.
//
// The one exception is yours to name: events fanned out on an exchange
// whose subscribers come and go, where reaching nobody is no mistake (a
// topic before its first subscriber). [WithUnroutableOK] names such
// exchanges; their unroutable messages are counted
// (acemq.outbox.unroutable, dropped=true) and deleted.
//
// Rows are deleted as soon as their message is confirmed and routed, so
// the table holds only what is still owed and needs no cleanup.
//
// # Duplicates
//
// A row is deleted in the transaction that claimed it, after its publish
// was confirmed. If that transaction does not commit (the relay's process
// dies, its database connection is lost, the commit fails), the rows go
// back to being due and are published again, with the same ids. A relay
// that is stopped (its ctx ends) finishes the publishes it started and
// records them, within [WithStopTimeout], rather than leave duplicates
// behind. Messages are delivered at least once; consumers make that once
// with the idempotency package.
//
// # Ordering
//
// A relay starts its publishes in write order. It claims the next batch
// while the last messages of the one before are still awaiting their
// confirms, but starts none of it before every message of the batch before
// has been started; at most [WithConcurrency] publishes await a confirm at
// once, across batches. A batch is deleted once all its publishes have
// ended, while later batches are published; the rows it holds stay locked
// until then, and later claims skip them.
//
// Publishes awaiting their confirms together may overtake each other on
// the way to the broker (the RabbitMQ transport spreads them over several
// channels), so a consumer can see messages written close together in a
// different order. With a concurrency of one, each message is published
// only after the one written before it was confirmed: the first attempts
// follow write order exactly.
//
// What no setting orders: a message whose attempt failed (unroutable,
// nacked, unconfirmed, refused, or not sent because the broker was
// blocked or stalled) is retried after messages written later have gone out, and
// several relays on one table publish side by side with no order between
// them. A consumer that needs strict order runs one relay with a
// concurrency of one and must still expect a retried message to arrive
// late.
//
// # Bad input
//
// [Outbox.Write] refuses what could never be published, before it touches
// the table: a body larger than [WithMaxBodySize] ([ErrTooLarge]; 16 MiB by
// default, RabbitMQ 4's max_message_size), a routing target that is
// malformed (both a queue and an exchange, the default exchange with no
// queue name, a name longer than AMQP's 255 bytes) or headers JSON cannot
// store ([ErrInvalidMessage]).
//
// # Rows another writer made
//
// A relay publishes every row of its table, whoever wrote it: hand-written
// SQL, another library, an older schema. Headers that are SQL NULL or JSON
// null are no headers. A row that cannot be published as it stands fails
// alone, recorded as any failed publish is (attempts, last_error naming
// what is wrong, next_attempt_at) and logged with its seq and id, while
// the rest of its batch goes out: headers that are not JSON or not a JSON
// object, a header number beyond a float64, a name, exchange, routing key,
// content type or correlation id over AMQP's 255 bytes, an empty id, a
// created_at of infinity, a body over [WithMaxBodySize] or headers stored
// in more than 1 MiB (both refused unread), and whatever the transport
// refuses (a missing exchange, headers past AMQP's limits). So does a NULL
// in a column CreateTableSQL makes NOT NULL, in a table altered since
// (NULL content_type, correlation_id and attempts read as their defaults).
// A publish that panics is its row's failure too, its stack logged. Such a
// row is retried with backoff like any other until it is mended or
// deleted.
//
// # Failures of the database and the broker
//
// A batch that fails as a whole (a lost or restarted database, a commit
// that did not go through) is logged, the relay waits with backoff and
// tries again; [Relay.Run] does not return for it. Whatever that batch
// published goes out again: a duplicate, never a loss. A broker that
// refuses publishes under a memory or disk alarm (transport.ErrBlocked)
// is the relay's trouble, not the messages': their rows are left as they
// were, and the relay waits and tries again. Run returns an error only
// when it cannot go on: the table does not exist, or the transport was
// closed.
//
// The claiming transaction stays open, idle, while its messages are
// published. A database that ends idle transactions
// (idle_in_transaction_session_timeout) sooner than a batch takes to
// publish turns every batch into duplicates: keep that setting above the
// transport's confirm timeout. LISTEN belongs to a session: a relay's pool
// must reach PostgreSQL directly or through session pooling (PgBouncer's
// transaction pooling loses the notifications; the relay then works by
// polling alone). A relay also keeps a second connection out of the pool
// for good, for its awake lock; writers take two advisory locks of the
// table (class ids hashed from "acemq.outbox.awake" and
// "acemq.outbox.writing"), so an application's own advisory locks should
// not use those. While writers keep transactions open after they wrote, an
// awake relay claims every 2 ms rather than sleep.
//
// # Tracing
//
// [Outbox.Write] stores the trace context of its ctx with the row. The
// relay publishes each row under a producer span, "publish {queue}" (or
// "publish {exchange}"), with the messaging semantic conventions'
// attributes and acemq.outbox.table: a child of that stored context, so
// that it joins the writer's trace, and the message carries the span's
// context in its place, so that the consumer's process span is its child.
// A publish that fails ends its span with an error and error.type
// (unroutable, nacked, unconfirmed, ...). The spans go to
// [WithTracerProvider]'s provider, else the global one; trace context is
// read and written with [WithPropagator]'s propagator, else the global
// one, else W3C trace context.
//
// # Metrics
//
// To [WithMeterProvider]'s provider, else the global one
// (otel.GetMeterProvider), a relay reports acemq.outbox.pending and
// acemq.outbox.oldest.age (gauges computed from the table when metrics
// are collected), acemq.outbox.published, acemq.outbox.unroutable,
// acemq.outbox.publish.failed by reason (nacked, unconfirmed, error), and
// acemq.outbox.relay.lag, a histogram of the time from a row's transaction
// to its confirm. Times are the database's for the row and the relay's for
// the confirm. Every measurement has a table attribute, the outbox's
// table, so that several outboxes in one process stay apart.
package outbox
