package idempotency_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
)

// The sequence the Idempotent middleware drives, by hand.
func ExampleMemory() {
	ctx := context.Background()
	store := idempotency.NewMemory(6 * time.Hour)

	first, _ := store.Claim(ctx, "order-42")
	concurrent, _ := store.Claim(ctx, "order-42") // another consumer, same message
	fmt.Println("first:", first, "| concurrent:", concurrent)

	_ = store.Release(ctx, "order-42") // the handler failed: let the retry in
	retry, _ := store.Claim(ctx, "order-42")
	_ = store.Confirm(ctx, "order-42") // the retry succeeded
	replay, _ := store.Claim(ctx, "order-42")
	fmt.Println("retry:", retry, "| replay:", replay)
	fmt.Println("evictions:", store.Evictions())
	// Output:
	// first: claimed | concurrent: in progress
	// retry: claimed | replay: done
	// evictions: 0
}

// The key an id is filed under: the id itself when it is short printable
// ASCII, else its SHA-256. Use it to find a message's row in the table.
func ExampleKey() {
	for _, id := range []string{
		"7f9c2ba4-e88f-4e2b-9f4a-1c5d8b0e6a31",
		"invoice\x00 2026/03",
		strings.Repeat("order-", 1000),
	} {
		key, _ := idempotency.Key(id)
		fmt.Println(key)
	}
	_, err := idempotency.Key("")
	fmt.Println(err)
	// Output:
	// 7f9c2ba4-e88f-4e2b-9f4a-1c5d8b0e6a31
	// sha256:94c7eaf3e6cae8c9e381580b63b41244e02d4fd4dbfe8db2093ca3b350a450ec
	// sha256:bfd4db9579ba54d82640996f33946dd0a4c459e5dfb567c983fd4314879e96b2
	// acemq: idempotency: empty message id
}

// The DDL for a migration. NewPostgres does no I/O, so this needs no
// database.
func ExamplePostgres_CreateTableSQL() {
	pool, err := pgxpool.New(context.Background(), "postgres://app@db.internal/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := idempotency.NewPostgres(pool, idempotency.WithTable("billing.idempotency"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(store.CreateTableSQL())
	// Output:
	// CREATE TABLE IF NOT EXISTS "billing"."idempotency" (
	// 	id           text        PRIMARY KEY,
	// 	claimed_at   timestamptz NOT NULL,
	// 	lease_until  timestamptz,
	// 	confirmed_at timestamptz,
	// 	owner        text,
	// 	CHECK ((lease_until IS NULL) <> (confirmed_at IS NULL))
	// );
	// ALTER TABLE "billing"."idempotency" ADD COLUMN IF NOT EXISTS owner text;
	// CREATE INDEX IF NOT EXISTS "idempotency_lease_until_idx" ON "billing"."idempotency" (lease_until) WHERE lease_until IS NOT NULL;
	// CREATE INDEX IF NOT EXISTS "idempotency_confirmed_at_idx" ON "billing"."idempotency" (confirmed_at);
}

// A handler that owns its transaction: the claim and the work commit
// together or not at all, so a crash at any point leaves either both or
// neither. This is the hand-written form; it replaces the Idempotent
// middleware on this queue rather than adding to it.
func ExamplePostgres_ClaimTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := idempotency.NewPostgres(pool)
	if err != nil {
		log.Fatal(err)
	}

	placeOrder := func(ctx context.Context, m *acemq.Message) ack.Ack {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return ack.Retry(err)
		}
		defer tx.Rollback(ctx) // after Commit, a no-op

		switch claim, err := store.ClaimTx(ctx, tx, m.ID()); {
		case err != nil:
			return ack.Retry(err)
		case claim == idempotency.Done:
			return ack.Accept() // handled before: the order is already in the table
		case claim == idempotency.InProgress:
			// Only a lease of the middleware's form does this: not done, so
			// not accepted.
			return ack.Retry(fmt.Errorf("%w: %s", idempotency.ErrInProgress, m.ID()))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders (message_id, body) VALUES ($1, $2)`, m.ID(), m.Body()); err != nil {
			return ack.Retry(err)
		}
		if err := tx.Commit(ctx); err != nil {
			return ack.Retry(err)
		}
		return ack.Accept()
	}

	mux := acemq.NewMux()
	mux.HandleFunc("orders", placeOrder)
	// Hand mux to an acemq.Server, and run store.Cleanup on a schedule.
}
