package outbox

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Why the relay says when it is awake: a transaction that called NOTIFY
// takes, as it commits, a lock that every other notifying transaction in
// the server waits for, and holds it until its commit record is flushed
// (PostgreSQL's async.c, PreCommit_Notify). A notification per one-row
// transaction therefore stops group commit and serialises every writer of
// the database. A relay that is working through the table needs no
// notification: it claims again as soon as a batch is out. So the table's
// trigger notifies only when no relay is awake.
//
// Two advisory locks per table say so, with nothing stored:
//
//   - awake, held (exclusive, session level) by one relay while it works.
//     The trigger tests it (try shared, then release at once): free means
//     no relay is awake, and it notifies; held means one is, and it does
//     not.
//   - writing, taken shared by the trigger before that test and held to the
//     end of the writer's transaction. A relay goes to sleep only by
//     taking it exclusive without waiting (none of the writers' transactions
//     is open), releasing awake and then writing; then it claims once more
//     before it sleeps. Every writer that skipped its notification tested
//     awake before that release, holding writing, so it had ended (committed,
//     its rows visible to that last claim) before the relay could take
//     writing. A writer that comes after the release finds awake free and
//     notifies. No row is left to the poll interval, in either order.
//
// While writers' transactions are open the relay cannot sleep: it claims
// every awakePoll instead. A table made by an older CreateTableSQL (whose
// trigger always notifies) and an older relay (which never holds awake)
// both still work: the first notifies every commit, the second is woken
// by every commit. Losing the connection that holds awake releases it;
// the writers notify again.

// awakePoll is how often an awake relay that found nothing claims again
// while it cannot sleep (writers' transactions are open).
const awakePoll = 2 * time.Millisecond

// lockKeys are a table's two advisory locks, as (classid, objid) pairs
// of the two-int4 form: the class names acemq's use, the object the table.
type lockKeys struct{ awakeClass, writingClass, object int32 }

func newLockKeys(channel string) lockKeys {
	return lockKeys{awakeClass: hash32("acemq.outbox.awake"), writingClass: hash32("acemq.outbox.writing"), object: hash32(channel)}
}

func hash32(s string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int32(h.Sum32())
}

// awake is one Run's hold on its table's awake lock, on a connection of
// its own (a session lock must not go back to the pool). Its methods are
// called by the Run goroutine only. Any error drops the connection, which
// releases the lock on the server: the writers notify again, as if no
// relay were awake, and the Run behaves as a relay that never holds it.
type awake struct {
	r    *Relay
	conn *pgx.Conn
	held bool
}

// take tries to hold the awake lock, opening the connection if need be.
// Another relay holding it, or a writer testing it at that instant, is
// no error: this Run then works as it would without the lock.
func (a *awake) take(ctx context.Context) {
	if a.held {
		return
	}
	if a.conn == nil {
		pc, err := a.r.o.pool.Acquire(ctx)
		if err != nil {
			return // the claim will fail too, and say why
		}
		a.conn = pc.Hijack()
	}
	k := a.r.o.q.keys
	if err := a.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, k.awakeClass, k.object).Scan(&a.held); err != nil {
		a.drop(ctx, err)
	}
}

// sleep releases the awake lock if no writer's transaction is open, and
// says whether it did: the relay must then claim once more before it
// sleeps. The writing lock is held only within the one statement, and
// awake is released before it.
func (a *awake) sleep(ctx context.Context) bool {
	if !a.held {
		return true
	}
	k := a.r.o.q.keys
	var done *bool
	err := a.conn.QueryRow(ctx, `SELECT CASE WHEN pg_try_advisory_lock($1, $3) THEN
	CASE WHEN pg_advisory_unlock($2, $3) THEN pg_advisory_unlock($1, $3) ELSE pg_advisory_unlock($1, $3) END END`,
		k.writingClass, k.awakeClass, k.object).Scan(&done)
	switch {
	case err != nil:
		a.drop(ctx, err)
		return true
	case done == nil:
		return false
	}
	a.held = false
	return true
}

// release lets go of the awake lock without looking at the writers: for a
// relay that is about to wait out a backoff, after which it claims anyway.
func (a *awake) release(ctx context.Context) {
	if !a.held {
		return
	}
	k := a.r.o.q.keys
	if _, err := a.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, k.awakeClass, k.object); err != nil {
		a.drop(ctx, err)
		return
	}
	a.held = false
}

// drop closes the connection, which releases the lock on the server.
func (a *awake) drop(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil {
		a.r.log.Warn("outbox relay lost the connection that says it is awake; writers notify on every commit until it is back", zap.Error(err))
	}
	a.close(ctx)
}

// close ends the connection, if any.
func (a *awake) close(ctx context.Context) {
	if a.conn == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = a.conn.Close(cctx)
	a.conn, a.held = nil, false
}
