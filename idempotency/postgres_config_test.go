package idempotency_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
)

func TestNewPostgresTableNames(t *testing.T) {
	t.Parallel()
	pool := brokertest.RefusedPool(t)
	tests := []struct {
		table string
		ok    bool
	}{
		{"acemq_idempotency", true},
		{"_x", true},
		{"t1", true},
		{"app.idempotency", true},
		{strings.Repeat("t", 48), true},
		{strings.Repeat("s", 63) + ".t", true},
		{"", false},
		{"Idempotency", false},
		{"1table", false},
		{"idem-potency", false},
		{"idem potency", false},
		{`idem"potency`, false},
		{"x; DROP TABLE users; --", false},
		{"x'", false},
		{"a.b.c", false},
		{".t", false},
		{"s.", false},
		{strings.Repeat("t", 49), false},
		{strings.Repeat("s", 64) + ".t", false},
		{"tablé", false},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			t.Parallel()
			s, err := idempotency.NewPostgres(pool, idempotency.WithTable(tt.table))
			switch {
			case tt.ok && err != nil:
				t.Fatalf("NewPostgres(%q) = %v, want it accepted", tt.table, err)
			case !tt.ok && !errors.Is(err, idempotency.ErrInvalidTable):
				t.Fatalf("NewPostgres(%q) = %v, want ErrInvalidTable", tt.table, err)
			case !tt.ok && s != nil:
				t.Fatal("a store came back with the error")
			}
		})
	}
}

func TestNewPostgresSettings(t *testing.T) {
	t.Parallel()
	pool := brokertest.RefusedPool(t)
	tests := []struct {
		name string
		pool *pgxpool.Pool
		opts []idempotency.PostgresOption
	}{
		{"nil pool", nil, nil},
		{"zero lease", pool, []idempotency.PostgresOption{idempotency.WithLease(0)}},
		{"sub-microsecond lease", pool, []idempotency.PostgresOption{idempotency.WithLease(time.Nanosecond)}},
		{"negative retention", pool, []idempotency.PostgresOption{idempotency.WithRetention(-time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := idempotency.NewPostgres(tt.pool, tt.opts...); err == nil {
				t.Fatal("NewPostgres accepted it")
			}
		})
	}
}
